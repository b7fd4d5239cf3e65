"""Serving calibration: the scorer fills P(satisfied), hot-swaps, refuses foreign or broken models, exports."""

from __future__ import annotations

import doctest
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from prometheus_client import CollectorRegistry

import distill.live_model
from distill.calibration.feedback import calibration_set_from_labels
from distill.calibration.retrain import train_calibration
from distill.registry import ModelRegistry
from monitor.contracts.errors import ModelError
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord, aggregate_r
from monitor.contracts.settings import REPO_ROOT
from monitor.runtime.wiring import build_pipeline
from monitor.stages.calibrate import KIND, CalibrationScorer, load_calibration
from tests.support.model_fixtures import feedback_label_records

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def rubric() -> RubricSet:
    return load_rubric_set("spur-copilot", REPO_ROOT / "prompts")


@pytest.fixture(scope="module")
def artifact(rubric: RubricSet, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """A gated calibration model for the simulated judge, as (arrays, manifest) to publish anywhere."""
    data = calibration_set_from_labels(feedback_label_records(rubric, 600, seed=5), rubric, llm_judge="simulated")
    registry = ModelRegistry(tmp_path_factory.mktemp("trained"))
    result = train_calibration(data, rubric=rubric, llm_judge="simulated", registry=registry)
    assert result.status == "promoted", result.reasons
    arrays, manifest = registry.load(KIND)
    return arrays, {k: v for k, v in manifest.items() if k not in ("kind", "version", "created_at")}


def score(rubric: RubricSet, yes: set[str], *, judge: str = "simulated", scorer: str = "llm") -> ScoreRecord:
    items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=i.id in yes, score=7.0 if i.id in yes else 0.0)
             for i in rubric.items]
    return ScoreRecord(conversation_id="c1", scorer=scorer, judge=judge, rubric_set=rubric.id,
                       rubric_version=rubric.version, model_version="m", items=items, R=aggregate_r(items),
                       metadata={"app": "web"})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_doctests() -> None:
    assert doctest.testmod(distill.live_model).failed == 0


def test_scorer_fills_satisfaction_per_label_source_and_hot_swaps(tmp_path: Path, rubric: RubricSet,
                                                                  artifact: tuple) -> None:
    registry = ModelRegistry(tmp_path)
    first = registry.publish(KIND, *artifact, promote=True)
    clock = Clock()
    scorer = CalibrationScorer(registry, rubric, poll_s=10.0, clock=clock)
    assert scorer.calibrate(score(rubric, set())) == (None, "no_model")  # nothing loaded before the first poll
    assert scorer.maybe_reload() and scorer.version == first

    happy, unhappy = score(rubric, {"sat.gratitude", "sat.praise"}), score(rubric, {"dsat.negative_feedback"})
    p_happy, p_unhappy = scorer.calibrate(happy).satisfaction, scorer.calibrate(unhappy).satisfaction
    assert p_happy is not None and p_unhappy is not None
    assert 0.0 < p_unhappy < 0.5 < p_happy < 1.0
    assert scorer.calibrate(score(rubric, set(), judge="openai:gpt-4o")) == (None, "other_judge")
    assert scorer.calibrate(score(rubric, set(), scorer="distilled")) == (None, "not_judge")
    csat = CalibrationScorer(registry, rubric, label_source="csat")
    csat.maybe_reload()
    assert csat.calibrate(happy).satisfaction < p_happy  # CSAT answers are harsher than the pooled sources

    second = registry.publish(KIND, *artifact, promote=True)
    assert not scorer.maybe_reload() and scorer.version == first  # polls at most every poll_s
    clock.now += 11.0
    assert scorer.maybe_reload() and scorer.version == second


def test_models_for_another_rubric_set_are_refused(tmp_path: Path, rubric: RubricSet, artifact: tuple) -> None:
    registry = ModelRegistry(tmp_path)
    version = registry.publish(KIND, *artifact, promote=True)
    other = rubric.model_copy(update={"version": "99"})
    with pytest.raises(ModelError, match=r"trained for rubric set 'spur-copilot@\d+', but this worker runs "
                                         r"'spur-copilot@99'"):
        load_calibration(registry, other, version)
    scorer = CalibrationScorer(registry, other)
    assert not scorer.maybe_reload() and scorer.live is None
    assert scorer.calibrate(score(other, set())) == (None, "no_model")

    tsv = registry.publish(KIND, artifact[0], {k: v for k, v in artifact[1].items() if k != "rubric_key"})
    with pytest.raises(ModelError, match="no rubric set in its manifest.*--label-store URL --rubric-set spur-copilot"):
        load_calibration(registry, rubric, tsv)


def pipeline(make_settings: Any, **overrides: Any):
    return build_pipeline(make_settings(**overrides), registry=CollectorRegistry())


def value(p: Any, name: str, **labels: str) -> float:
    return p.metrics.registry.get_sample_value(name, labels) or 0.0


def test_pipeline_calibrates_judge_scores_and_exports_the_denominator(make_settings, rubric: RubricSet,
                                                                     artifact: tuple) -> None:
    settings = make_settings(dimension_values={"app": ["web"]})  # dimension values are an allow-list
    version = ModelRegistry(settings.model_registry).publish(KIND, *artifact, promote=True)
    p = build_pipeline(settings, registry=CollectorRegistry())  # loads the live model at start-up
    assert value(p, "convmon_calibration_info", version=version, rubric=rubric.key, llm_judge="simulated",
                 label_source="shared") == 1.0
    judged = p.calibrate(score(rubric, {"sat.gratitude"}))
    assert judged.satisfaction is not None and 0.5 < judged.satisfaction < 1.0
    p.exporter.observe(judged)
    p.exporter.observe(p.calibrate(score(rubric, set(), judge="another-judge")))  # exported without satisfaction
    dims = {"app": "web", "locale": "unknown", "model_version": "unknown"}
    assert value(p, "convmon_satisfaction_probability_sum_total", scorer="llm", **dims) == judged.satisfaction
    assert value(p, "convmon_satisfaction_calibrated_total", scorer="llm", **dims) == 1.0
    assert value(p, "convmon_conversations_scored_total", scorer="llm", **dims) == 2.0
    assert value(p, "convmon_satisfaction_uncalibrated_total", reason="other_judge") == 1.0


def test_a_broken_model_never_stops_the_judge_stage(make_settings, rubric: RubricSet, artifact: tuple) -> None:
    settings = make_settings()
    registry = ModelRegistry(settings.model_registry)
    nan = {k: (np.full_like(v, np.nan) if v.dtype.kind == "f" else v) for k, v in artifact[0].items()}
    registry.publish(KIND, nan, artifact[1], promote=True)  # loads fine, predicts NaN
    p = pipeline(make_settings, model_registry=settings.model_registry)
    record = score(rubric, {"sat.gratitude"})
    assert p.calibrate(record) is record
    assert value(p, "convmon_satisfaction_uncalibrated_total", reason="error") == 1.0

    corrupt = registry.publish(KIND, *artifact, promote=True)
    (Path(registry.root) / KIND / corrupt / "weights.npz").write_bytes(b"not a zip file")
    p.calibration.maybe_reload(force=True)  # refused: the NaN model is still the live one here
    assert p.calibration.version != corrupt
    fresh = pipeline(make_settings, model_registry=settings.model_registry)  # a worker starting now
    assert fresh.calibration.live is None and fresh.calibrate(record) is record
    assert value(fresh, "convmon_satisfaction_uncalibrated_total", reason="no_model") == 1.0


def test_retrain_round_trains_calibration_that_workers_serve(make_settings, rubric: RubricSet) -> None:
    """`convmon retrain`'s round (monitor/runtime/retrainer.py) publishes; a worker's pipeline serves it."""
    from monitor.runtime.retrainer import Retrainer

    settings = make_settings(retrain_min_labels=100_000, calibration_min_labels=300)  # distilled: skipped
    p = build_pipeline(settings, registry=CollectorRegistry())
    retrainer = Retrainer(settings.distill, settings.rubrics, registry=CollectorRegistry())
    p.store.upsert(feedback_label_records(rubric, 250, seed=8))
    assert retrainer.run_round() == {"distilled": "skipped", "calibration": "skipped"}
    assert ModelRegistry(settings.model_registry).versions(KIND) == []  # 250 < calibration_min_labels
    p.store.upsert(feedback_label_records(rubric, 600, seed=9))
    assert retrainer.run_round()["calibration"] == "promoted"
    registry = ModelRegistry(settings.model_registry)
    assert registry.live_version(KIND) is not None, registry.manifest(KIND, registry.versions(KIND)[-1])["gate"]
    p.calibration.maybe_reload(force=True)
    assert p.calibrate(score(rubric, {"sat.gratitude"})).satisfaction is not None

    before = registry.versions(KIND)
    off = make_settings(retrain_min_labels=100_000, calibration_min_labels=0)  # same store and registry
    off_retrainer = Retrainer(off.distill, off.rubrics, registry=CollectorRegistry())
    assert off_retrainer.run_round() == {"distilled": "skipped"}  # 0: no calibration
    assert registry.versions(KIND) == before
