"""RUBICON selection and the evaluation metrics, on synthetic score matrices with known structure."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_score, recall_score

from distill.rubrics.measure import bootstrap_indices, evaluate_set, netsat, point_metrics, yield_at_precision
from distill.rubrics.rubicon import ALPHA_GRID, greedy_select, objective, select, tau_for
from monitor.contracts.errors import ConfigError
from monitor.contracts.rubric_set import RubricSet


def synthetic(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items 0 (SAT) and 3 (DSAT) track the label; 1, 2 (SAT) and 4 (DSAT) are noise."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.5).astype(int)
    noise = rng.random((n, 5)) * 10
    scores = noise.copy()
    scores[:, 0] = np.where(y == 1, 8, 1) + rng.normal(0, 1.5, n)
    scores[:, 3] = np.where(y == 0, 8, 1) + rng.normal(0, 1.5, n)
    return np.clip(scores, 0, 10), np.array([1, 1, 1, -1, -1.0]), y


def test_greedy_picks_the_informative_items_first() -> None:
    scores, signs, y = synthetic()
    chosen = greedy_select(scores, signs, y, alpha=1.0)
    assert set(chosen[:2]) == {0, 3}
    assert set(chosen) <= {0, 1, 2, 3, 4}


def test_budgets_are_separate_per_polarity() -> None:
    scores, signs, y = synthetic()
    assert greedy_select(scores, signs, y, alpha=1.0, sat_budget=1, dsat_budget=0) == [0]
    assert greedy_select(scores, signs, y, alpha=1.0, sat_budget=0, dsat_budget=1) == [3]


def test_objective_parts() -> None:
    r = np.array([10.0, 10.0, -10.0, -10.0])
    y = np.array([1, 1, 0, 0])
    j, separation, sharpness, t = objective(r, y, 1, alpha=1.0)
    assert separation == pytest.approx(2 * math.tanh(1.0))
    assert t == pytest.approx(0.0) and sharpness == 0.0 and j == pytest.approx(separation)
    flipped = objective(r, 1 - y, 1, alpha=1.0)
    assert flipped[1] == pytest.approx(-separation) and flipped[2] == pytest.approx(math.tanh(1.0))
    assert tau_for(4) == 20.0


def test_select_threshold_is_the_midpoint_in_both_scales() -> None:
    scores, signs, y = synthetic()
    result = select(scores, signs, y, seed=3)
    assert set(result.cv) == set(ALPHA_GRID) and result.alpha in ALPHA_GRID
    r = (scores[:, result.selected] * signs[result.selected]).sum(axis=1)
    s = np.tanh(r / result.tau)
    assert result.threshold == pytest.approx((s[y == 1].mean() + s[y == 0].mean()) / 2)
    assert np.array_equal(s > result.threshold, r > result.threshold_r)
    assert max(result.cv.values()) > 0.9  # the structure is easy: held-out balanced accuracy is high


def test_select_needs_both_classes_and_matching_shapes() -> None:
    scores, signs, y = synthetic(20)
    with pytest.raises(ConfigError, match="at least 2 SAT and 2 DSAT"):
        select(scores, signs, np.ones(20, dtype=int))
    with pytest.raises(ConfigError, match=r"scores must be \(conversations, items\)"):
        select(scores[:, :3], signs, y)


def test_select_fails_when_no_item_separates() -> None:
    y = np.array([1, 0] * 10)
    with pytest.raises(ConfigError, match="selected no item"):
        select(np.full((20, 2), 5.0), np.array([1.0, -1.0]), y)


@pytest.mark.parametrize(
    ("y", "score", "expected"),
    [
        ([1, 1, 1, 0, 0, 0], [6, 5, 4, 3, 2, 1], 1.0),
        ([1, 0, 1, 0], [4, 3, 2, 1], 0.5),  # top SAT alone (1/4) + bottom DSAT alone (1/4)
        ([1, 1, 0, 0], [1, 1, 1, 1], 0.0),  # one tie: no cut-off separates anything
        ([0] + [1] * 9, list(range(10, 0, -1)), 1.0),  # all ten labelled SAT at exactly 0.9 precision
    ],
)
def test_yield_at_precision(y: list[int], score: list[float], expected: float) -> None:
    assert yield_at_precision(np.array(y), np.array(score, dtype=float), 0.9) == pytest.approx(expected)


def test_point_metrics_match_sklearn() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 100)
    r = rng.normal(size=100) + y
    ns = np.clip(r / 5, -1, 1)
    for positive, label in (("sat", 1), ("dsat", 0)):
        metrics = point_metrics(y, r, ns, 0.3, positive)
        predicted = (r > 0.3).astype(int)
        assert metrics["precision"] == pytest.approx(precision_score(y, predicted, pos_label=label))
        assert metrics["recall"] == pytest.approx(recall_score(y, predicted, pos_label=label))
        assert metrics["f1"] == pytest.approx(f1_score(y, predicted, pos_label=label))
    assert metrics["delta_netsat"] == pytest.approx(ns[y == 1].mean() - ns[y == 0].mean())


def test_netsat_is_mean_sat_minus_mean_dsat_over_ten() -> None:
    scores = np.array([[10.0, 0.0, 5.0], [0.0, 10.0, 10.0]])
    assert netsat(scores, np.array([1.0, 1.0, -1.0])).tolist() == [0.0, -0.5]


def test_evaluate_set_uses_the_learned_threshold_and_bootstraps() -> None:
    rubric = RubricSet.model_validate({
        "id": "t", "version": "1", "provenance": {"selection": {"threshold_r": 4.0}},
        "items": [{"id": "sat.a", "name": "A", "polarity": "sat", "description": "a"},
                  {"id": "dsat.b", "name": "B", "polarity": "dsat", "description": "b"}],
    })
    scores = np.array([[9, 0], [8, 1], [5, 0], [1, 7], [0, 9], [np.nan, 1]], dtype=float)
    y = np.array([1, 1, 1, 0, 0, 1])
    report = evaluate_set("t", rubric, scores, y, resamples=bootstrap_indices(6, 300, seed=2))
    assert (report.n, report.failed, report.threshold_r) == (5, 1, 4.0)
    assert report.values["accuracy"] == 1.0  # R = 9, 7, 5, -6, -9 against 4.0
    lo, hi = report.ci["accuracy"]
    assert lo <= report.values["accuracy"] <= hi
    assert report.as_dict()["ci95"]["f1"] == list(report.ci["f1"])
