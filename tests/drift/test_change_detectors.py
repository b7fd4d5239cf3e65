"""Page-Hinkley and CUSUM on synthetic streams: stated detection delay and false-alarm rate."""

from __future__ import annotations

import random

import pytest

from monitor.drift.base import DriftDetector
from monitor.drift.cusum import CUSUM
from monitor.drift.page_hinkley import PageHinkley


def make(name: str, mode: str = "up") -> DriftDetector:
    if name == "page_hinkley":
        return PageHinkley(min_instances=10, delta=0.5, threshold=10.0, mode=mode)  # type: ignore[arg-type]
    return CUSUM(k=0.5, h=10.0, target=0.0, sigma=1.0, mode=mode)  # type: ignore[arg-type]


def alarms(detector: DriftDetector, stream: list[float]) -> list[int]:
    out = []
    for i, x in enumerate(stream):
        detector.update(x)
        if detector.drift_detected:
            out.append(i)
    return out


@pytest.mark.parametrize("name", ["page_hinkley", "cusum"])
def test_two_sigma_shift_is_detected_within_15_values(name: str) -> None:
    for seed in range(20):
        rng = random.Random(seed)
        stream = [rng.gauss(0, 1) for _ in range(2000)] + [rng.gauss(2, 1) for _ in range(100)]
        hits = [i for i in alarms(make(name), stream) if i >= 2000]
        assert hits and hits[0] - 2000 < 15, (seed, hits[:3])


@pytest.mark.parametrize("name", ["page_hinkley", "cusum"])
def test_stationary_stream_false_alarm_rate_below_1_in_20000(name: str) -> None:
    total = 0
    n = 0
    for seed in range(10):
        rng = random.Random(100 + seed)
        stream = [rng.gauss(0, 1) for _ in range(20_000)]
        total += len(alarms(make(name), stream))
        n += len(stream)
    assert total / n < 1 / 20_000, total


@pytest.mark.parametrize("name", ["page_hinkley", "cusum"])
def test_one_sided_detectors_ignore_the_other_direction(name: str) -> None:
    rng = random.Random(3)
    stream = [rng.gauss(0, 1) for _ in range(500)] + [rng.gauss(-3, 1) for _ in range(200)]
    assert alarms(make(name, "up"), stream) == []
    assert alarms(make(name, "down"), stream)


def test_page_hinkley_resets_after_a_detection_and_adapts_to_the_new_level() -> None:
    rng = random.Random(5)
    stream = [rng.gauss(0, 1) for _ in range(500)] + [rng.gauss(3, 1) for _ in range(2000)]
    hits = alarms(make("page_hinkley"), stream)
    assert len(hits) == 1 and 500 <= hits[0] < 510


def test_cusum_keeps_alarming_while_the_mean_stays_off_target() -> None:
    rng = random.Random(5)
    stream = [rng.gauss(0, 1) for _ in range(500)] + [rng.gauss(3, 1) for _ in range(500)]
    assert len(alarms(make("cusum"), stream)) > 50


def test_cusum_estimates_target_and_sigma_during_warmup() -> None:
    rng = random.Random(9)
    cusum = CUSUM(min_instances=200, k=0.5, h=8.0, mode="up")
    stream = [rng.gauss(10, 2) for _ in range(1000)] + [rng.gauss(14, 2) for _ in range(50)]
    hits = alarms(cusum, stream)
    assert hits and 1000 <= hits[0] < 1015


def test_bad_parameters_are_refused_with_the_parameter_named() -> None:
    with pytest.raises(ValueError, match="The 'mode' parameter of PageHinkley must be 'up', 'down' or 'both'"):
        PageHinkley(mode="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="The 'mode' parameter of CUSUM"):
        CUSUM(mode="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"The 'sigma' parameter of CUSUM must be a float in \(0, inf\). Got 0"):
        CUSUM(sigma=0)
