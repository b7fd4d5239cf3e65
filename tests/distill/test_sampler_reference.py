"""Boosted labels in retraining: a hash-only holdout, and the drift reference from out-of-fold predictions
stored with the model, loaded by workers at start-up and kept across a restart."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from distill.registry import ModelRegistry
from distill.retrain import retrain_once
from distill.serving import load_live
from distill.store import LabelStore
from distill.train import dataset_from_records, split_holdout
from monitor.runtime.wiring import build_pipeline
from tests.support.labelled import rubric, synth


def _boosted(pairs: list[tuple], every: int) -> list[tuple]:
    """Mark every ``every``-th judged conversation as an uncertainty pick (pi 0.5), the rest as hash picks."""
    out = []
    for k, (conversation, score) in enumerate(pairs):
        by, pi = ("uncertainty", 0.5) if k % every == 0 else ("hash", 0.1)
        out.append((conversation, score.model_copy(update={"sampled_by": by, "inclusion_probability": pi,
                                                           "sample_weight": 1 / pi})))
    return out


@pytest.fixture
def trained(make_settings, tmp_path: Path):
    settings = make_settings(retrain_min_labels=50, label_retention_days=3650, featurizer="hashing")
    store = LabelStore(settings.label_store_url, retention_days=settings.label_retention_days)
    store.upsert(_boosted(synth(240, seed=3, now=1_700_000_000.0), every=3))
    result = retrain_once(settings.distill, store, ModelRegistry(settings.model_registry), rubric(),
                          now=1_700_000_100.0)
    yield settings, store, result
    store.close()


def test_labels_keep_pi_and_the_holdout_is_hash_only(trained) -> None:
    settings, store, result = trained
    records = store.fetch()
    assert {r.sampled_by for r in records} == {"hash", "uncertainty"}
    assert {r.inclusion_probability for r in records} == {0.1, 0.5}
    data = dataset_from_records(records, rubric())
    train, test = split_holdout(data, test_size=0.25, seed=0)
    assert test.hash_mask().all() and len(test) == pytest.approx(0.25 * data.hash_mask().sum(), abs=1)
    assert not train.hash_mask().all()  # boosted labels all train (unweighted)
    assert result.status == "promoted"
    assert result.evaluation is not None
    assert max(m.n for m in result.evaluation.items.values()) == len(test)


def test_reference_is_out_of_fold_on_the_hash_slice(trained) -> None:
    settings, store, result = trained
    registry = ModelRegistry(settings.model_registry)
    live = load_live(registry, rubric(), result.version)
    manifest = registry.manifest("distilled", result.version)
    data = dataset_from_records(store.fetch(), rubric())
    train, _ = split_holdout(data, test_size=settings.distill_holdout_fraction, seed=0)
    hashed = train.hash_mask()
    assert manifest["reference"]["hash_rows"] == int(hashed.sum())
    item = "dsat.negative_feedback"
    reference = live.reference[item]
    assert len(reference) == manifest["reference"]["n"][item] == int(hashed.sum())
    # in-sample predictions of the same rows are sharper than the out-of-fold ones the reference holds
    in_sample = live.model.predict_proba(live.featurizer.transform(
        [c for c, h in zip(train.conversations, hashed, strict=True) if h]))[:, live.model.item_ids.index(item)]
    assert not np.allclose(np.sort(reference), np.sort(in_sample), atol=1e-3)
    assert np.abs(2 * in_sample - 1).mean() > np.abs(2 * reference - 1).mean()  # fitted rows look more certain
    assert 0 < live.mean_uncertainty["margin"] <= 1 and "entropy" in live.mean_uncertainty


def test_workers_load_the_reference_with_the_model_and_a_restart_keeps_it(trained) -> None:
    settings, _, result = trained
    registry = ModelRegistry(settings.model_registry)
    live = load_live(registry, rubric(), result.version)
    sizes = []
    for _restart in range(2):
        pipeline = build_pipeline(settings, registry=CollectorRegistry())  # loads the live model at start-up
        metrics = pipeline.metrics.registry
        drift = pipeline.exporter.drift
        assert drift is not None
        size = metrics.get_sample_value("convmon_drift_reference_size", {"rubric": "dsat.negative_feedback"})
        assert size == len(live.reference["dsat.negative_feedback"])
        assert pipeline.policy is not None
        assert pipeline.policy.mean_uncertainty(result.version) == live.mean_uncertainty["margin"]
        state = drift._items["dsat.negative_feedback"]
        sizes.append((size, state.psi.reference_n, tuple(state.psi._edges)))
        pipeline.store.close()
    assert sizes[0] == sizes[1]


def test_an_old_labels_table_gets_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # the table as released before the sampler
        conn.execute("CREATE TABLE convmon_labels (id INTEGER PRIMARY KEY, conversation_id VARCHAR(256) NOT NULL, "
                     "rubric_set VARCHAR(128) NOT NULL, rubric_version VARCHAR(64) NOT NULL, judge VARCHAR(128) "
                     "NOT NULL, model_version VARCHAR(128) NOT NULL, turns JSON NOT NULL, items JSON NOT NULL, "
                     "r FLOAT NOT NULL, thumbs VARCHAR(8), csat INTEGER, metadata JSON NOT NULL, labelled_at FLOAT "
                     "NOT NULL, ended_at FLOAT, updated_at FLOAT NOT NULL, CONSTRAINT convmon_labels_key UNIQUE "
                     "(conversation_id, rubric_set, rubric_version, judge))")
    store = LabelStore(f"sqlite:///{path}")
    pairs = synth(2, seed=1)
    store.upsert(pairs[:1] + _boosted(pairs[1:], every=1))
    by_id = {r.conversation_id: r for r in store.fetch()}
    assert by_id[pairs[0][0].conversation_id].sampled_by is None and by_id[pairs[0][0].conversation_id].in_hash_slice
    assert by_id[pairs[1][0].conversation_id].sampled_by == "uncertainty"
    store.close()
