"""PSI and JSD on synthetic score streams: stationary noise, detection delay, references."""

from __future__ import annotations

import math
import random

import pytest

from monitor.drift.base import HistogramDetector
from monitor.drift.jsd import JSD
from monitor.drift.psi import PSI

# Stated bounds: on stationary data a window of 500 against a first-N reference of 1000 stays below
# these values (docstrings quote them), well under the default thresholds (0.25 and 0.05).
STATIONARY_MAX = {PSI: 0.15, JSD: 0.025}


@pytest.mark.parametrize("cls", [PSI, JSD])
def test_stationary_stream_stays_below_the_stated_noise_bound(cls: type[HistogramDetector]) -> None:
    for seed in range(5):
        rng = random.Random(seed)
        detector = cls()
        peak = 0.0
        for _ in range(1000 + 10_000):
            detector.update(rng.betavariate(2, 8))
            assert not detector.drift_detected
            if not math.isnan(detector.value):
                peak = max(peak, detector.value)
        assert 0 < peak < STATIONARY_MAX[cls], peak


@pytest.mark.parametrize("cls", [PSI, JSD])
def test_shift_is_detected_before_half_a_window_has_passed(cls: type[HistogramDetector]) -> None:
    rng = random.Random(1)
    detector = cls()
    detector.set_reference([rng.betavariate(2, 8) for _ in range(5000)])
    for _ in range(500):
        detector.update(rng.betavariate(2, 8))
    assert not detector.drift_detected
    delay = None
    for i in range(500):
        detector.update(rng.betavariate(3, 5))  # mean 0.2 -> 0.375
        if detector.drift_detected:
            delay = i
            break
    assert delay is not None and delay < 250, delay


def test_value_is_nan_until_reference_and_window_are_full() -> None:
    psi = PSI(window_size=20, reference_size=30)
    for _ in range(49):
        psi.update(0.3)
        assert math.isnan(psi.value)
    assert psi.reference_n == 30
    psi.update(0.3)
    assert 0 <= psi.value < 0.05  # not exactly 0: half-count smoothing weighs more on the smaller window


def test_values_outside_unit_interval_are_clipped() -> None:
    jsd = JSD(window_size=10, reference_size=10)
    for _ in range(10):
        jsd.update(0.0)
    for _ in range(10):
        jsd.update(-5.0)
    assert jsd.value == pytest.approx(0.0, abs=1e-12)


def test_set_reference_restarts_the_window() -> None:
    psi = PSI(window_size=10)
    psi.set_reference([0.1] * 50)
    for _ in range(10):
        psi.update(0.9)
    assert psi.drift_detected
    psi.set_reference([0.9] * 50)
    assert not psi.drift_detected and math.isnan(psi.value)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="n_bins >= 2. Got 500, 1000, 1 instead"):
        PSI(n_bins=1)
    with pytest.raises(ValueError, match="at least one value. Got an empty array instead"):
        JSD().set_reference([])
