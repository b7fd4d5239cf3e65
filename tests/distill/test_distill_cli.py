"""``convmon distill train``: from a JSONL export and from the store, with scheduler exit codes."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from distill.cli import app
from distill.label_record import LabelRecord
from distill.registry import ModelRegistry
from tests.support.labelled import synth


def test_train_from_jsonl_then_store_exit_codes(make_settings, tmp_path: Path) -> None:
    settings = make_settings(featurizer="hashing", retrain_min_labels=50, label_retention_days=3650)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(LabelRecord.from_score(c, s).model_dump_json() for c, s in synth(200, seed=5)))
    runner = CliRunner()
    args = ["train", "--registry", str(tmp_path / "models"), "--report-dir", str(tmp_path / "reports"),
            "--store-url", settings.label_store_url]
    result = runner.invoke(app, [*args, "--jsonl", str(labels)], obj=settings)
    assert result.exit_code == 0, result.output
    assert "distill: promoted" in result.output and "insufficient positives: 0 < 10" in result.output
    registry = ModelRegistry(tmp_path / "models")
    live = registry.live_version("distilled")
    assert live is not None and (tmp_path / "reports" / live / "report.md").is_file()

    empty = runner.invoke(app, [*args, "--schedule"], obj=settings)  # the store has no labels yet
    assert empty.exit_code == 3, empty.output
    bad = runner.invoke(app, [*args, "--schedule", "--rubric", "no-such-rubric"], obj=settings)
    assert bad.exit_code == 1 and "rubric set 'no-such-rubric' not found" in bad.output
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"conversation_id": 1}\n')
    assert runner.invoke(app, [*args, "--jsonl", str(broken)], obj=settings).exit_code == 1


def test_cronjob_runs_the_one_retrainer_on_the_workers_registry_volume() -> None:
    import yaml

    deploy = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
    job = yaml.safe_load((deploy / "distill-cronjob.yaml").read_text())
    worker_claims = {v["persistentVolumeClaim"]["claimName"] for d in yaml.safe_load_all((deploy / "worker.yaml")
                     .read_text()) if d and d["kind"] == "Deployment"
                     for v in d["spec"]["template"]["spec"]["volumes"] if "persistentVolumeClaim" in v}
    spec = job["spec"]["jobTemplate"]["spec"]
    pod = spec["template"]["spec"]
    assert job["kind"] == "CronJob" and job["spec"]["concurrencyPolicy"] == "Forbid" and spec["backoffLimit"] == 0
    assert pod["containers"][0]["args"] == ["retrain", "--once"]  # the image ENTRYPOINT is convmon
    claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    assert claims <= worker_claims


def test_train_with_the_lexicon_featurizer_records_it_for_the_workers(make_settings, tmp_path: Path) -> None:
    """`CONVMON_FEATURIZER=hashing+lexicon` (or `--featurizer`): the artifact names both parts and the weight, so a
    worker rebuilds the same featurizer (tests/distill/test_lexicon_featurizer.py scores with it)."""
    settings = make_settings(featurizer="hashing", retrain_min_labels=50, label_retention_days=3650)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(LabelRecord.from_score(c, s).model_dump_json() for c, s in synth(200, seed=5)))
    result = CliRunner().invoke(app, ["train", "--registry", str(tmp_path / "models"), "--report-dir",
                                      str(tmp_path / "reports"), "--store-url", settings.label_store_url,
                                      "--featurizer", "hashing+lexicon", "--jsonl", str(labels)], obj=settings)
    assert result.exit_code == 0, result.output
    registry = ModelRegistry(tmp_path / "models")
    version = registry.live_version("distilled")
    assert version is not None
    featurizer = registry.load("distilled", version)[1]["featurizer"]
    assert featurizer["name"] == "hashing+lexicon"
    assert featurizer["parts"][1] == {"name": "lexicon", "params": {"weight": 3.0}}
