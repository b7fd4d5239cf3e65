"""DriftMonitor fed through the Exporter: gauges, detection counters, shadow pairing."""

from __future__ import annotations

import math
import random

import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings
from monitor.drift.monitor import DriftMonitor
from monitor.drift.rate_stream import RateStream
from monitor.stages.export import Exporter

RUBRIC = RubricSet.model_validate(
    {
        "id": "t",
        "version": "1",
        "items": [
            {"id": "sat.gratitude", "name": "G", "polarity": "sat", "description": "thanks"},
            {"id": "dsat.revision", "name": "R", "polarity": "dsat", "description": "rephrase"},
        ],
    }
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def build(**kw) -> tuple[Exporter, DriftMonitor, Metrics, Clock]:
    metrics = Metrics(CollectorRegistry())
    clock = Clock()
    drift = DriftMonitor(metrics, RUBRIC, clock=clock, **kw)
    return Exporter(metrics, dimensions=[], cap=5, rubric=RUBRIC, drift=drift), drift, metrics, clock


def distilled(cid: str, p_sat: float, p_dsat: float, *, shadow: bool = False) -> ScoreRecord:
    items = [
        ItemResult(item_id="sat.gratitude", polarity="sat", probability=p_sat),
        ItemResult(item_id="dsat.revision", polarity="dsat", probability=p_dsat),
    ]
    return ScoreRecord(conversation_id=cid, scorer="distilled", judge="hashing", rubric_set="t", rubric_version="1",
                       model_version="m", items=items, R=p_sat - p_dsat, shadow=shadow)


def llm(cid: str, sat: bool, dsat: bool | None) -> ScoreRecord:
    items = [
        ItemResult(item_id="sat.gratitude", polarity="sat", verdict=sat, score=8 if sat else 0),
        ItemResult(item_id="dsat.revision", polarity="dsat", verdict=dsat, uncertain=dsat is None),
    ]
    return ScoreRecord(conversation_id=cid, scorer="llm", judge="simulated", rubric_set="t", rubric_version="1",
                       model_version="simulated", items=items, R=0.0)


def value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def dsat_probability(rng: random.Random, rate: float) -> float:
    """A calibrated-looking distilled probability: high for a present DSAT pattern, low otherwise."""
    present = rng.random() < rate
    return min(1.0, max(0.0, (0.75 if present else 0.08) + rng.gauss(0, 0.08)))


def test_known_series_exist_before_any_data() -> None:
    _, _, m, _ = build()
    assert value(m, "convmon_drift_detected", rubric="dsat.revision", detector="cusum", scorer="llm") == 0
    assert value(m, "convmon_drift_detections_total", rubric="sat.gratitude", detector="psi", scorer="distilled") == 0
    assert value(m, "convmon_agreement_pairs_total", rubric="dsat.revision", judge="yes", distilled="no") == 0
    assert math.isnan(value(m, "convmon_drift_psi", rubric="dsat.revision"))  # unknown, not "no drift"
    assert value(m, "convmon_drift_reference_size", rubric="dsat.revision") == 0


def test_dsat_rate_spike_is_detected_and_held_for_the_hold_period() -> None:
    exporter, _, m, clock = build(window_size=500, reference_size=1000, batch_size=50, hold_s=600)
    rng = random.Random(0)
    for i in range(6000):  # stationary: reference is the first 1000, then 5000 more
        exporter.observe(distilled(f"c{i}", 0.5, dsat_probability(rng, 0.1)))
        clock.now += 0.1
    labels = dict(rubric="dsat.revision", scorer="distilled")
    for detector in ("page_hinkley", "cusum", "psi", "jsd"):
        assert value(m, "convmon_drift_detections_total", detector=detector, **labels) == 0, detector
    assert value(m, "convmon_drift_reference_size", rubric="dsat.revision") == 1000
    assert value(m, "convmon_drift_psi", rubric="dsat.revision") < 0.25
    first: dict[str, int] = {}
    for i in range(1000):  # DSAT rate 10% -> 35%
        exporter.observe(distilled(f"s{i}", 0.5, dsat_probability(rng, 0.35)))
        clock.now += 0.1
        for detector in ("page_hinkley", "cusum", "psi", "jsd"):
            if detector not in first and i % 10 == 9 and value(m, "convmon_drift_detections_total",
                                                               detector=detector, **labels):
                first[detector] = i
    # stated delays (expected probability 0.15 -> 0.31, 3 standard errors of a batch): the change
    # detectors within 200 conversations (4 batches), PSI/JSD within 400 (a window of 500 must turn over;
    # a 10% -> 25% shift moves PSI only to ~0.16, 'moderate', which is the change detectors' job)
    assert first["page_hinkley"] < 200 and first["cusum"] < 200, first
    assert first["psi"] < 400 and first["jsd"] < 400, first
    assert value(m, "convmon_drift_detected", detector="cusum", **labels) == 1
    assert value(m, "convmon_drift_psi", rubric="dsat.revision") > 0.25
    # SAT probabilities never moved
    for detector in ("page_hinkley", "cusum", "psi", "jsd"):
        assert value(m, "convmon_drift_detections_total", rubric="sat.gratitude", detector=detector,
                     scorer="distilled") == 0
    # the DSAT rate comes back down; once hold_s passes without a change-point alarm the flag clears
    for i in range(3000):
        exporter.observe(distilled(f"r{i}", 0.5, dsat_probability(rng, 0.1)))
        clock.now += 1.0
    assert value(m, "convmon_drift_detected", detector="page_hinkley", **labels) == 0


def test_change_detector_false_alarm_rate_on_stationary_rates() -> None:
    """Stated: fewer than 20 alarms per million conversations per detector with a first-N reference."""
    alarms = {"page_hinkley": 0, "cusum": 0}
    n = 0
    for seed in range(5):
        rng = random.Random(seed)
        stream = RateStream(direction="up", batch_size=50, reference_size=1000)
        for _ in range(100_000):
            for name in stream.update(1.0 if rng.random() < 0.1 else 0.0) or ():
                alarms[name] += 1
            n += 1
    assert n == 500_000
    for name, count in alarms.items():
        assert count / n * 1e6 < 20, (name, count)


def test_set_reference_replaces_the_first_n_fallback() -> None:
    exporter, drift, m, _ = build(window_size=100, reference_size=1000, batch_size=10)
    rng = random.Random(1)
    drift.set_reference({"dsat.revision": [dsat_probability(rng, 0.1) for _ in range(2000)]})
    assert value(m, "convmon_drift_reference_size", rubric="dsat.revision") == 2000
    for i in range(100):
        exporter.observe(distilled(f"c{i}", 0.5, dsat_probability(rng, 0.1)))
    assert 0 <= value(m, "convmon_drift_psi", rubric="dsat.revision") < 0.25  # computed at once, no warm-up
    assert math.isnan(value(m, "convmon_drift_psi", rubric="sat.gratitude"))  # still filling its first 1000
    with pytest.raises(KeyError, match="reference names item 'dsat.nope', which is not in rubric set t@1"):
        drift.set_reference({"dsat.nope": [0.1]})


def test_shadow_pairs_feed_agreement_in_either_arrival_order() -> None:
    exporter, _, m, _ = build()
    exporter.observe(llm("a", sat=True, dsat=False))
    exporter.observe(distilled("a", 0.9, 0.7, shadow=True))  # dsat disagrees
    exporter.observe(distilled("b", 0.1, 0.1, shadow=True))
    exporter.observe(llm("b", sat=False, dsat=None))  # uncertain dsat: not paired
    exporter.observe(distilled("c", 0.9, 0.9))  # not shadow: never paired
    exporter.observe(llm("c", sat=False, dsat=True))
    pairs = lambda item, j, d: value(m, "convmon_agreement_pairs_total", rubric=item, judge=j, distilled=d)  # noqa: E731
    assert pairs("sat.gratitude", "yes", "yes") == 1
    assert pairs("sat.gratitude", "no", "no") == 1
    assert pairs("dsat.revision", "no", "yes") == 1
    assert pairs("dsat.revision", "yes", "yes") == 0
    assert value(m, "convmon_agreement_accuracy", rubric="sat.gratitude") == 1.0
    assert value(m, "convmon_agreement_accuracy", rubric="dsat.revision") == 0.0
    assert value(m, "convmon_agreement_window_size", rubric="dsat.revision") == 1


def test_pending_halves_are_bounded() -> None:
    exporter, drift, _, _ = build(pair_capacity=3)
    for i in range(10):
        exporter.observe(llm(f"x{i}", sat=True, dsat=False))
    assert len(drift._pending) == 3


def test_llm_rates_get_their_own_change_detectors() -> None:
    exporter, _, m, _ = build(reference_size=200, batch_size=20)
    rng = random.Random(2)
    for i in range(1500):
        exporter.observe(llm(f"c{i}", sat=True, dsat=rng.random() < 0.1))
    assert value(m, "convmon_drift_detections_total", rubric="dsat.revision", detector="cusum", scorer="llm") == 0
    for i in range(400):
        exporter.observe(llm(f"s{i}", sat=True, dsat=rng.random() < 0.4))
    assert value(m, "convmon_drift_detections_total", rubric="dsat.revision", detector="cusum", scorer="llm") >= 1
    assert value(m, "convmon_drift_statistic", rubric="dsat.revision", detector="cusum", scorer="llm") >= 0


def test_feature_drift_on_the_probability_vector() -> None:
    exporter, _, m, _ = build(window_size=200, reference_size=200)
    rng = random.Random(3)
    for i in range(600):
        exporter.observe(distilled(f"c{i}", rng.betavariate(2, 5), rng.betavariate(2, 8)))
    assert value(m, "convmon_feature_drift_auc", source="probabilities") < 0.6
    for i in range(200):
        exporter.observe(distilled(f"s{i}", rng.betavariate(2, 5), rng.betavariate(4, 6)))
    assert value(m, "convmon_feature_drift_auc", source="probabilities") > 0.7
    assert value(m, "convmon_feature_drift_mean_shift", source="probabilities") > 1.0


def test_from_settings_uses_the_drift_settings() -> None:
    settings = Settings(drift_window=100, drift_reference_size=300, drift_batch_size=25, agreement_window=50,
                        drift_hold_s=60)
    drift = DriftMonitor.from_settings(Metrics(CollectorRegistry()), RUBRIC, settings.drift)
    assert (drift.window_size, drift.reference_size, drift.batch_size, drift.agreement_window, drift.hold_s) == (
        100, 300, 25, 50, 60)


def test_agreement_drop_is_counted_once_and_flagged() -> None:
    exporter, _, m, _ = build(agreement_window=100)
    rng = random.Random(4)
    for i in range(200):  # the distilled model tracks the judge
        yes = rng.random() < 0.3
        exporter.observe(llm(f"a{i}", sat=yes, dsat=False))
        exporter.observe(distilled(f"a{i}", 0.9 if yes else 0.1, 0.1, shadow=True))
    labels = dict(rubric="sat.gratitude", detector="agreement", scorer="shadow")
    assert value(m, "convmon_drift_detections_total", **labels) == 0
    for i in range(200):  # now it answers at random
        exporter.observe(llm(f"b{i}", sat=rng.random() < 0.3, dsat=False))
        exporter.observe(distilled(f"b{i}", rng.random(), 0.1, shadow=True))
    assert value(m, "convmon_drift_detections_total", **labels) == 1  # a state: one rising edge
    assert value(m, "convmon_drift_detected", **labels) == 1
    assert value(m, "convmon_agreement_auc", rubric="sat.gratitude") < 0.7
    assert value(m, "convmon_drift_detections_total", rubric="dsat.revision", detector="agreement",
                 scorer="shadow") == 0
