"""Calibration from the label store: verdicts + feedback -> training set -> gate -> registry (and the CLI)."""

from __future__ import annotations

import doctest
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import distill.calibration.feedback as feedback
from distill.calibration.cli import app
from distill.calibration.data import CalibrationDataError
from distill.calibration.feedback import (
    NOT_SATISFIED,
    SATISFIED,
    TARGET,
    FeedbackMapping,
    calibration_questions,
    calibration_set_from_labels,
    most_common_judge,
)
from distill.calibration.network import LLMRubricCalibrator
from distill.calibration.retrain import KIND, heldout_mask, retrain_calibration, train_calibration
from distill.registry import ModelRegistry
from distill.store import LabelStore
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import REPO_ROOT, Settings
from tests.support.model_fixtures import CSAT_OFFSET, feedback_label_records

torch.set_num_threads(1)
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
runner = CliRunner()


@pytest.fixture(scope="module")
def rubric() -> RubricSet:
    return load_rubric_set("spur-copilot", REPO_ROOT / "prompts")


@pytest.fixture(scope="module")
def records(rubric: RubricSet) -> list:
    return feedback_label_records(rubric, 1000, seed=1)


@pytest.fixture(scope="module")
def trained(rubric: RubricSet, records: list) -> tuple:
    """One model trained through the gate on 1,000 synthetic conversations (shared by several tests)."""
    data = calibration_set_from_labels(records, rubric, llm_judge="simulated")
    registry = ModelRegistry(tempfile.mkdtemp(prefix="calibration-registry-"))
    result = train_calibration(data, rubric=rubric, llm_judge="simulated", registry=registry)
    return data, registry, result


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LabelStore]:
    url = f"sqlite:///{tmp_path / 'labels.db'}" if request.param == "sqlite" else PG_URL
    s = LabelStore(url, table_prefix=f"t{uuid.uuid4().hex[:10]}_")
    yield s
    s.drop()
    s.close()


def test_doctests() -> None:
    assert doctest.testmod(feedback).failed == 0


def test_feedback_mapping_channels_csat_and_tenants() -> None:
    m = FeedbackMapping()
    assert m.labels("up", 5, {}) == [("thumbs", SATISFIED), ("csat", SATISFIED)]
    assert m.labels("down", 2, {}) == [("thumbs", NOT_SATISFIED), ("csat", NOT_SATISFIED)]
    assert m.labels(None, 3, {}) == []  # a neutral CSAT says neither, by default
    assert FeedbackMapping(csat_neutral="satisfied").labels(None, 3, {}) == [("csat", SATISFIED)]
    assert FeedbackMapping(tenant_key="app").labels(None, 1, {"app": "acme"}) == [("csat:acme", NOT_SATISFIED)]
    assert FeedbackMapping(tenant_key="app").labels("up", None, {}) == [("thumbs", SATISFIED)]  # no tenant: channel
    with pytest.raises(CalibrationDataError, match="'csat_neutral' parameter of FeedbackMapping must be one of"):
        FeedbackMapping(csat_neutral="maybe")  # type: ignore[arg-type]


def test_store_to_training_set(store: LabelStore, rubric: RubricSet) -> None:
    records = feedback_label_records(rubric, 60, seed=3)
    with_feedback = [r for r in records if r.thumbs or r.csat]
    other_version = [r.model_copy(update={"rubric_version": "0"}) for r in with_feedback[:3]]
    other_judge = [r.model_copy(update={"judge": "openai:gpt-4o-mini"}) for r in with_feedback[:2]]
    store.upsert([*records, *other_version, *other_judge])
    fetched = store.fetch(rubric_set=rubric.id, rubric_version=rubric.version, with_feedback=True)
    assert len(fetched) == len(with_feedback) + 2 < len(records) + 2  # conversations without feedback stay out
    assert store.count(with_feedback=True) == len(fetched) + 3
    assert most_common_judge(fetched) == "simulated"

    data = calibration_set_from_labels(fetched, rubric, llm_judge="simulated")
    expected = [(r.conversation_id, src, a) for r in with_feedback for src, a in FeedbackMapping().labels(
        r.thumbs, r.csat, r.metadata)]
    got = [(data.dialogue_ids[d], j, int(y[data.target_index]))
           for d, j, y in zip(data.dialogue_index, data.judges, data.labels, strict=True)]
    assert sorted(got) == sorted(expected)
    assert data.questions == tuple(calibration_questions(rubric)) and data.target == TARGET
    assert data.notes["other_llm_judge"] == 2 and data.notes["no_feedback"] > 0  # csat 3 and nothing else
    assert (data.labels[:, :-1] == 0).all()  # the feedback answers only the target
    assert (data.X_dialogues[:, -1] == 0).all()  # the judge is never asked the target: a zero row
    by_id = {r.conversation_id: r for r in with_feedback}
    d = data.dialogue_ids[0]
    for q, item in enumerate(by_id[d].items):
        p_yes = 0.5 if item.uncertain else float(item.verdict)
        assert data.X_dialogues[0, q].tolist() == [1.0 - p_yes, p_yes]
    with pytest.raises(CalibrationDataError, match="no conversation of spur-copilot@.* judged by 'nobody'"):
        calibration_set_from_labels(fetched, rubric, llm_judge="nobody")


def test_heldout_split_is_stable_and_about_the_fraction() -> None:
    ids = [f"c{i}" for i in range(4000)]
    mask = heldout_mask(ids, 0.25)
    assert 0.22 < mask.mean() < 0.28
    assert (heldout_mask(ids[::-1], 0.25)[::-1] == mask).all()  # a conversation's side never changes
    with pytest.raises(ValueError, match=r"holdout fraction must be in \(0, 1\)"):
        heldout_mask(ids, 1.0)


def test_trained_model_beats_the_constant_baseline(trained: tuple) -> None:
    _, registry, result = trained
    m = result.metrics
    assert result.status == "promoted", result.reasons
    assert m["log_likelihood"] > m["baseline_log_likelihood"] + 0.1, m
    assert m["smooth_ece"] < 0.1, m
    assert registry.live_version(KIND) == result.version


def test_channel_offsets_learn_a_base_rate_difference(trained: tuple, rubric: RubricSet) -> None:
    data, registry, result = trained
    arrays, manifest = registry.load(KIND, result.version)
    model = LLMRubricCalibrator.from_arrays(arrays, manifest)
    assert manifest["label_sources"] == ["csat", "thumbs"]
    X = data.X_dialogues
    p_thumbs = model.predict_proba(X, judges=["thumbs"] * len(X))[:, 1].mean()
    p_csat = model.predict_proba(X, judges=["csat"] * len(X))[:, 1].mean()
    p_shared = model.predict_proba(X)[:, 1].mean()
    # the generator's truth: the same conversations, CSAT 1.5 logits harsher than thumbs
    from tests.support.model_fixtures import satisfaction_logit

    logits = np.array([satisfaction_logit({q: bool(x[1] == 1.0) for q, x in zip(data.questions, row, strict=False)
                                           if q != TARGET}, rubric) for row in X])
    true_gap = np.mean(1 / (1 + np.exp(-logits)) - 1 / (1 + np.exp(-(logits + CSAT_OFFSET))))
    assert true_gap > 0.15
    assert p_thumbs - p_csat == pytest.approx(true_gap, abs=0.08)
    assert p_csat < p_shared < p_thumbs  # the shared model is trained on both channels pooled


def test_registry_round_trip_manifest_and_gate_against_live(trained: tuple, rubric: RubricSet) -> None:
    data, registry, first = trained
    manifest = registry.manifest(KIND, first.version)
    assert manifest["rubric_key"] == rubric.key and manifest["questions"] == calibration_questions(rubric)
    assert manifest["llm_judge"] == "simulated" and manifest["feedback_mapping"] == {"csat_neutral": "na",
                                                                                     "tenant_key": None}
    assert manifest["gate"]["passed"] and not list(Path(registry.root, KIND, first.version).glob("*.pkl"))
    arrays, _ = registry.load(KIND, first.version)
    assert all(a.dtype != object for a in arrays.values())  # plain arrays: loaded with allow_pickle=False
    # The same data again cannot beat the live model it reproduces: published, not promoted.
    again = train_calibration(data, rubric=rubric, llm_judge="simulated", registry=registry)
    assert again.status == "rejected" and again.live_version == first.version
    assert any("does not beat live" in r for r in again.reasons)
    assert registry.live_version(KIND) == first.version
    assert again.metrics["live_log_likelihood"] == pytest.approx(first.metrics["log_likelihood"])


def test_gate_rejects_a_model_that_cannot_beat_the_baseline(rubric: RubricSet, tmp_path: Path) -> None:
    """Feedback independent of the verdicts: nothing to learn, the candidate must not go live."""
    rng = np.random.default_rng(0)
    records = [r.model_copy(update={"thumbs": "up" if rng.random() < 0.5 else "down", "csat": None})
               for r in feedback_label_records(rubric, 300, seed=4)]
    data = calibration_set_from_labels(records, rubric, llm_judge="simulated")
    registry = ModelRegistry(tmp_path)
    result = train_calibration(data, rubric=rubric, llm_judge="simulated", registry=registry)
    assert result.status == "rejected" and "does not beat the constant baseline" in result.reasons[0]
    assert registry.live_version(KIND) is None and registry.versions(KIND) == [result.version]


def test_retrain_calibration_respects_min_labels(make_settings, rubric: RubricSet) -> None:
    settings = make_settings(calibration_min_labels=500, label_retention_days=36500)
    store = LabelStore(settings.label_store_url)
    registry = ModelRegistry(settings.model_registry)
    try:
        store.upsert(feedback_label_records(rubric, 300, seed=6))
        skipped = retrain_calibration(settings.distill, store, registry, rubric)
        assert skipped.status == "skipped" and "calibration_min_labels=500" in skipped.reasons[0]
        assert registry.versions(KIND) == []
        done = retrain_calibration(settings.distill.model_copy(update={"calibration_min_labels": 50}), store, registry,
                                   rubric, params={"finetune_epochs": 10})
        assert done.status in ("promoted", "rejected") and registry.versions(KIND) == [done.version]
    finally:
        store.close()


def test_cli_train_from_label_store(tmp_path: Path, rubric: RubricSet, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in Settings.model_fields if n.startswith("calibration_")]:
        monkeypatch.delenv(f"CONVMON_{name.upper()}", raising=False)
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    store = LabelStore(url)
    store.upsert(feedback_label_records(rubric, 800, seed=2))
    store.close()
    reg = tmp_path / "models"
    result = runner.invoke(app, ["train", "--label-store", url, "--rubric-set", "spur-copilot", "--registry",
                                 str(reg), "--promote"])
    assert result.exit_code == 0, result.output
    assert "promoted" in result.output and "beats the baseline" in result.output
    assert ModelRegistry(reg).manifest(KIND)["rubric_key"] == rubric.key


@pytest.mark.parametrize(("args", "message"), [
    ([], "give either --judgments and --evaluations"),
    (["--judgments", "a.tsv", "--evaluations", "b.tsv", "--label-store", "sqlite:///x.db"], "not both"),
    (["--judgments", "a.tsv"], "--judgments and --evaluations go together"),
    (["--label-store", "sqlite:///x.db"], "--label-store needs --registry"),
    (["--label-store", "sqlite:///x.db", "--registry", "r", "--out", "o"], "--out, --ids and --grid are for TSV"),
])
def test_cli_train_input_errors(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["train", *args])
    assert result.exit_code == 2 and message in result.output
