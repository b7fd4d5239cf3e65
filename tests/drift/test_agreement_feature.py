"""Judge/distilled agreement and feature drift on synthetic streams."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from monitor.drift.agreement import Agreement
from monitor.drift.feature_drift import FeatureDrift


def good_pair(rng: random.Random, rate: float = 0.1) -> tuple[bool, float]:
    y = rng.random() < rate
    return y, min(1.0, max(0.0, (0.8 if y else 0.1) + rng.gauss(0, 0.12)))


def test_agreement_stays_quiet_while_the_distilled_model_tracks_the_judge() -> None:
    rng = random.Random(0)
    agreement = Agreement(window_size=300)
    for _ in range(5000):
        agreement.update(good_pair(rng))
        assert not agreement.drift_detected
    assert agreement.accuracy > 0.95 and agreement.auc > 0.95


def test_agreement_drop_is_flagged_within_two_thirds_of_a_window() -> None:
    rng = random.Random(1)
    agreement = Agreement(window_size=300)
    for _ in range(300):
        agreement.update(good_pair(rng))
    delay = None
    for i in range(300):  # the model now says "no" with random confidence: AUC collapses, accuracy holds
        agreement.update((rng.random() < 0.1, rng.random() * 0.4))
        if agreement.drift_detected:
            delay = i
            break
    assert delay is not None and delay < 200, delay


def test_agreement_window_is_sliding_and_auc_needs_both_classes() -> None:
    agreement = Agreement(window_size=4, min_samples=1)
    for pair in [(True, 0.9), (False, 0.1), (True, 0.2), (True, 0.8), (True, 0.7)]:
        agreement.update(pair)
    assert agreement.n == 4
    assert agreement.accuracy == pytest.approx(0.75)  # the first pair slid out
    assert agreement.auc == pytest.approx(1.0)
    only_yes = Agreement(min_samples=1)
    only_yes.update((True, 0.9))
    assert math.isnan(only_yes.auc) and not only_yes.drift_detected


def test_feature_drift_domain_classifier_is_near_half_when_stationary() -> None:
    rng = np.random.default_rng(0)
    fd = FeatureDrift(window_size=300, reference_size=300, every=300)
    aucs = []
    for _ in range(3000):
        fd.update(rng.normal(size=5))
        if fd.evaluations > len(aucs):
            aucs.append(fd.auc)
            assert not fd.drift_detected
    assert len(aucs) == 9 and max(aucs) < 0.6 and fd.mean_shift < 0.3


def test_feature_drift_sees_many_small_shifts_that_no_single_feature_shows() -> None:
    rng = np.random.default_rng(1)
    fd = FeatureDrift(window_size=500, reference_size=500, every=500)
    for _ in range(1000):
        fd.update(rng.normal(size=20))
    assert not fd.drift_detected
    for _ in range(500):
        fd.update(rng.normal(loc=0.15, size=20))  # 0.15 sd per feature, 0.67 sd overall
    assert fd.mean_shift < 0.35
    assert fd.drift_detected and fd.auc > 0.6


def test_feature_drift_refuses_a_vector_of_the_wrong_size() -> None:
    fd = FeatureDrift()
    fd.set_reference(np.zeros((20, 3)))
    with pytest.raises(ValueError, match=r"Expected a vector of 3 features. Got shape \(2,\)"):
        fd.update([1.0, 2.0])
    with pytest.raises(ValueError, match="at least 10 rows. Got shape"):
        fd.set_reference(np.zeros((5, 3)))


def test_feature_drift_fits_at_most_once_per_min_interval_however_fast_updates_come() -> None:
    """At thousands of conversations per second, a fit every ``every`` updates would eat the worker."""
    now = [0.0]
    rng = np.random.default_rng(3)
    fd = FeatureDrift(window_size=50, reference_size=50, every=50, min_interval_s=10.0, clock=lambda: now[0])
    for _ in range(50 + 500):  # reference, then ten windows' worth within one second
        fd.update(rng.normal(size=3))
        now[0] += 0.001
    assert fd.evaluations == 1
    now[0] += 10.0
    fd.update(rng.normal(size=3))  # the interval has passed and `every` updates are waiting: evaluate now
    assert fd.evaluations == 2
