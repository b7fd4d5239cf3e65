"""`convmon calibrate train|evaluate` end to end on the paper's synthetic data (few epochs)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from distill.calibration.cli import app
from distill.calibration.network import LLMRubricCalibrator, calibrated_satisfaction
from distill.registry import ModelRegistry
from tests.support.strict_json import loads

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "llm-rubric"
JUDGMENTS = DATA / "human_judges_synth_all_FIXED_ANON.tsv"
EVALUATIONS = DATA / "gpt-3.5-turbo-16k_synth_evaluations_FIXED.tsv"
FAST = ["--pretrain-epochs", "5", "--finetune-epochs", "10"]
runner = CliRunner()


@pytest.fixture
def data_files() -> tuple[Path, Path]:
    if not (JUDGMENTS.is_file() and EVALUATIONS.is_file()):
        pytest.fail(f"shared LLM-Rubric data missing under {DATA}; see ../shared/data/README.md")
    return JUDGMENTS, EVALUATIONS


def split_by_system(src: Path, dst: Path, keep: set[str]) -> Path:
    """Keep rows whose text_id starts with one of ``keep`` (the dialogue system, V1..V5)."""
    with src.open(newline="") as fh, dst.open("w", newline="") as out:
        reader = csv.reader(fh, delimiter="\t")
        writer = csv.writer(out, delimiter="\t", lineterminator="\n")
        header = next(reader)
        writer.writerow(header)
        col = header.index("text_id")
        writer.writerows(r for r in reader if r[col].split("_")[0] in keep)
    return dst


def test_evaluate_train_on_one_set_test_on_another(tmp_path: Path, data_files: tuple[Path, Path]) -> None:
    hj, ev = data_files
    sets = {name: (split_by_system(hj, tmp_path / f"{name}_hj.tsv", keep),
                   split_by_system(ev, tmp_path / f"{name}_ev.tsv", keep))
            for name, keep in (("train", {"V1", "V2", "V3", "V4"}), ("test", {"V5"}))}
    result = runner.invoke(app, ["evaluate", "--train-judgments", str(sets["train"][0]), "--train-evaluations",
                                 str(sets["train"][1]), "--test-judgments", str(sets["test"][0]),
                                 "--test-evaluations", str(sets["test"][1]), "--json", *FAST])
    assert result.exit_code == 0, result.output
    summary = loads(result.stdout)
    assert summary["target"] == "Q0" and summary["protocol"].startswith("train on train set")
    assert set(summary) >= {"rmse", "pearson", "spearman", "kendall", "baselines"}
    assert 40 < summary["n"] < 200  # only V5 dialogues are scored
    assert summary["rmse"] < summary["baselines"]["judge_expected"]["rmse"]


def test_evaluate_cv_writes_a_report(tmp_path: Path, data_files: tuple[Path, Path]) -> None:
    hj, ev = data_files
    result = runner.invoke(app, ["evaluate", "--train-judgments", str(hj), "--train-evaluations", str(ev),
                                 "--train-ids", str(DATA / "synth_dialogue_ids.tsv"), *FAST, "--folds", "3",
                                 "--report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "3-fold CV grouped by dialogue" in result.stdout
    assert (tmp_path / "reliability.png").stat().st_size > 10_000
    assert "| Constant training mean |" in (tmp_path / "calibration.md").read_text()


def test_train_writes_arrays_and_publishes(tmp_path: Path, data_files: tuple[Path, Path]) -> None:
    hj, ev = data_files
    out, reg = tmp_path / "model", tmp_path / "registry"
    result = runner.invoke(app, ["train", "--judgments", str(hj), "--evaluations", str(ev), "--out", str(out),
                                 "--registry", str(reg), "--promote", *FAST])
    assert result.exit_code == 0, result.output
    manifest = loads((out / "manifest.json").read_text())
    assert manifest["target"] == "Q0" and manifest["n_judges"] == 24 and manifest["n_options"][7] == 3
    with np.load(out / "weights.npz", allow_pickle=False) as npz:
        model = LLMRubricCalibrator.from_arrays(dict(npz), manifest)
    arrays, live_manifest = ModelRegistry(reg).load("calibration")
    assert live_manifest["kind"] == "calibration"
    again = LLMRubricCalibrator.from_arrays(arrays, live_manifest)
    X = np.full((2, 9, 4), 0.25, dtype=np.float32)
    np.testing.assert_allclose(model.predict_proba(X, judges=["1", "zz"]), again.predict_proba(X, judges=["1", "zz"]))

    # serving: P(satisfied) per judge-scored conversation, summed as an expected count
    conversations = [{"Q0": [0.1, 0.1, 0.2, 0.6], "Q8": [0.2, 0.5, 0.3]}, {"Q0": [0.7, 0.2, 0.1, 0.0]}]
    p_sat = calibrated_satisfaction(again, live_manifest["questions"], conversations)
    assert p_sat.shape == (2,) and ((p_sat > 0) & (p_sat < 1)).all()
    expected = again.predict_proba(np.stack([np.zeros((9, 4)), np.zeros((9, 4))]).astype(np.float32))
    assert not np.allclose(p_sat, expected[:, 2:].sum(axis=1))  # the judge answers matter
    with pytest.raises(ValueError, match="4 probabilities for Q8, which has 3 options"):
        calibrated_satisfaction(again, live_manifest["questions"], [{"Q8": [0.1, 0.2, 0.3, 0.4]}])

def test_undefined_metrics_are_null_in_strict_json(tmp_path: Path, data_files: tuple[Path, Path]) -> None:
    hj, ev = data_files
    train = split_by_system(hj, tmp_path / "train_hj.tsv", {"V1", "V2", "V3", "V4"})
    test = split_by_system(hj, tmp_path / "test_hj.tsv", {"V5"})
    rows = test.read_text().splitlines()
    q0 = rows[0].split("\t").index("Q0")
    test.write_text("\n".join([rows[0], *(r for r in rows[1:] if r.split("\t")[q0] == "4")]) + "\n")
    result = runner.invoke(app, ["evaluate", "--train-judgments", str(train), "--train-evaluations", str(ev),
                                 "--test-judgments", str(test), "--test-evaluations", str(ev), "--json", *FAST])
    assert result.exit_code == 0, result.output
    summary = loads(result.stdout)  # every test satisfied: no correlation, no ROC-AUC
    assert summary["pearson"] is None and summary["roc_auc"] is None and summary["rmse"] is not None
    assert summary["baselines"]["constant_mean"]["pearson"] is None


def test_cli_errors_name_the_problem(tmp_path: Path, data_files: tuple[Path, Path]) -> None:
    hj, ev = data_files
    r = runner.invoke(app, ["evaluate", "--train-judgments", str(hj), "--train-evaluations", str(ev),
                            "--test-judgments", str(hj)])
    assert r.exit_code == 2 and "--test-judgments and --test-evaluations go together" in r.output
    bad = tmp_path / "bad.tsv"
    bad.write_text("text_id\tQ0\tannotator_id\nV1_10\tgreat\t3\n")
    r = runner.invoke(app, ["evaluate", "--train-judgments", str(bad), "--train-evaluations", str(ev)])
    assert r.exit_code == 2 and "bad.tsv:2 [Q0]: expected a number, got 'great'" in r.output
    r = runner.invoke(app, ["train", "--judgments", str(hj), "--evaluations", str(ev)])
    assert r.exit_code == 2 and "give --out DIR and/or --registry ROOT" in r.output

