"""retrain_once end to end on a SQLite label store: train, evaluate, gate both ways, publish, report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distill.featurizers.hashing import HashingFeaturizer
from distill.promotion import Evaluation, ItemMetrics, promotion_gate
from distill.registry import ModelRegistry
from distill.retrain import retrain_once
from distill.store import LabelStore
from tests.support.labelled import rubric, synth


@pytest.fixture
def env(make_settings, tmp_path: Path):
    settings = make_settings(retrain_min_labels=50, label_retention_days=3650, featurizer="hashing")
    store = LabelStore(settings.label_store_url, retention_days=settings.label_retention_days)
    yield settings, store, ModelRegistry(settings.model_registry)
    store.close()


def test_retrain_skips_without_enough_labels(env) -> None:
    settings, store, registry = env
    store.upsert(synth(20, seed=1))
    store.upsert(synth(40, seed=9, now=1_700_000_000.0 - 4000 * 86_400))  # past the 3650-day retention
    result = retrain_once(settings.distill, store, registry, rubric(), now=1_700_000_000.0)
    assert result.status == "skipped" and result.reasons == ["insufficient labels: 20 < retrain_min_labels=50"]
    assert result.purged == 40 and store.count() == 20
    assert registry.versions("distilled") == []


def test_retrain_promotes_then_gate_rejects_a_worse_candidate(env, tmp_path: Path) -> None:
    settings, store, registry = env
    rub = rubric()
    store.upsert(synth(240, seed=2))
    first = retrain_once(settings.distill, store, registry, rub, now=1_700_000_000.0, report_dir=tmp_path / "reports")
    assert first.status == "promoted" and registry.live_version("distilled") == first.version
    assert first.item_status["sat.gratitude"] == "trained"
    assert first.item_status["sat.praise"] == "insufficient positives: 0 < 10"
    assert first.evaluation is not None and first.evaluation.macro("roc_auc") > 0.95
    manifest = registry.manifest("distilled")
    assert manifest["rubric_key"] == rub.key and manifest["training_range"][0] < manifest["training_range"][1]
    assert manifest["featurizer"]["name"] == "hashing" and manifest["gate"]["passed"]
    report = first.report.read_text()
    assert "insufficient positives: 0 < 10" in report and "| sat.gratitude | trained |" in report
    assert (first.report.parent / "roc.png").stat().st_size > 1000
    assert (first.report.parent / "reliability.png").stat().st_size > 1000

    # a degraded featurizer (every n-gram hashed into one bucket) is worse on the same held-out rows: kept, not live
    crippled = HashingFeaturizer(n_word_features=1, n_char_features=1, n_context_features=1, n_last_features=1)
    second = retrain_once(settings.distill, store, registry, rub, now=1_700_000_000.0, featurizer=crippled)
    assert second.status == "rejected" and second.live_version == first.version
    assert any("macro ROC-AUC" in r for r in second.reasons)
    assert registry.live_version("distilled") == first.version and second.version in registry.versions("distilled")
    assert registry.manifest("distilled", second.version)["gate_passed"] is False


def _eval(**aucs: float) -> Evaluation:
    return Evaluation({i: ItemMetrics(n=100, positives=20, roc_auc=a, average_precision=0.5, f1=0.5, brier=0.1,
                                      threshold=0.5) for i, a in aucs.items()})


def test_promotion_gate_both_ways() -> None:
    live = _eval(**{"sat.a": 0.90, "dsat.b": 0.80})
    assert promotion_gate(_eval(**{"sat.a": 0.90, "dsat.b": 0.795}), live, tolerance=0.01).passed
    worse = promotion_gate(_eval(**{"sat.a": 0.85, "dsat.b": 0.80}), live, tolerance=0.01)
    assert not worse.passed and worse.reasons == ["macro ROC-AUC 0.8250 < live 0.8500 - tolerance 0.01"]
    dropped = promotion_gate(_eval(**{"sat.a": 0.99}), live)
    assert not dropped.passed and "does not score items the live model scores: ['dsat.b']" in dropped.reasons[0]
    assert promotion_gate(_eval(**{"sat.a": 0.6}), None).passed
    assert not promotion_gate(Evaluation({}), None).passed
    assert np.isclose(worse.live["roc_auc"], 0.85)
