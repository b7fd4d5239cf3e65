"""The anchors' e-processes are valid by construction: exact null expectations, not only simulations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.drift.anchor_drift import evaluate_item
from monitor.drift.exchangeability import ChangePointEProcess, conformal_pvalues, run_evalue


@given(st.integers(1, 60).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m))),
       st.floats(0.001, 0.999))
def test_conformal_pvalue_is_uniform_when_the_newest_value_is_any_of_the_bag(bag: tuple[int, int], c: float) -> None:
    """Exchangeable: the newest is each of the m values with chance 1/m; with theta uniform, P(p <= c) = c."""
    m, k = bag
    thetas = (np.arange(20_000) + 0.5) / 20_000  # a fine grid integrates theta exactly enough
    hit = 0.0
    if k:
        hit += k / m * float(np.mean(conformal_pvalues(k, m, True, thetas) <= c))
    if m - k:
        hit += (m - k) / m * float(np.mean(conformal_pvalues(k, m, False, thetas) <= c))
    assert hit == pytest.approx(c, abs=2e-4)


@settings(max_examples=50)
@given(st.lists(st.integers(2, 80), min_size=1, max_size=8), st.floats(1.0, 6.0))
def test_run_evalue_has_mean_one_under_the_null(histories: list[int], spread: float) -> None:
    """Every hit pattern, weighted by its null probability (independent Bernoulli(c) per anchor): mean exactly 1."""
    n = np.array(histories, dtype=float)
    c = np.minimum(0.5, spread / n)
    total = 0.0
    for pattern in itertools.product((True, False), repeat=len(n)):
        hits = np.array(pattern)
        p = np.where(hits, c / 2, (1 + c) / 2)  # one p-value inside and one outside each cut
        prob = float(np.prod(np.where(hits, c, 1 - c)))
        total += prob * run_evalue(p, n, spread=spread)
    assert total == pytest.approx(1.0, rel=1e-9)


def test_change_point_mixture_is_a_martingale() -> None:
    """With e-values 0 or 2 (mean 1), every path enumerated: the mean of the mixture stays 1 at every step."""
    for t in range(1, 9):
        values = []
        for path in itertools.product((0.0, 2.0), repeat=t):
            process = ChangePointEProcess(alpha=0.5)
            for e in path:
                process.update(e)
            values.append(process.value)
        assert float(np.mean(values)) == pytest.approx(1.0)


def test_no_change_rarely_alarms_at_a_loose_level() -> None:
    """Exchangeable runs (a noisy judge, no change): the alarm rate stays under alpha even at alpha = 0.2."""
    rng = np.random.default_rng(7)
    alarms = 0
    trials = 200
    for _ in range(trials):
        human = rng.uniform(size=60) < 0.3
        noise = rng.uniform(size=60) * 0.3  # each anchor its own noise level: the test assumes none
        runs = np.array([human ^ (rng.uniform(size=60) < noise) for _ in range(25)], dtype=float)
        alarms += evaluate_item(runs, human.astype(float), rng.uniform(size=runs.shape), alpha=0.2).drifted
    assert alarms / trials <= 0.2


def test_errors_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="'alpha' parameter of ChangePointEProcess must be in"):
        ChangePointEProcess(alpha=1.0)
    with pytest.raises(ValueError, match="An e-value must be >= 0"):
        ChangePointEProcess().update(-1.0)
    with pytest.raises(ValueError, match="n_strange must be within"):
        conformal_pvalues(3, 2, True, 0.5)
    with pytest.raises(ValueError, match="verdicts and theta must be runs x anchors"):
        evaluate_item(np.zeros((3, 4)), np.zeros(5), np.zeros((3, 4)))


def test_a_change_is_found_and_described() -> None:
    rng = np.random.default_rng(3)
    human = rng.uniform(size=200) < 0.1
    runs = [human ^ (rng.uniform(size=200) < 0.05) for _ in range(20)]
    flipped = rng.uniform(size=200) < 0.2
    runs += [run ^ flipped for run in runs[:4]]
    result = evaluate_item(np.array(runs, dtype=float), human.astype(float), rng.uniform(size=(24, 200)))
    assert result.drifted and result.detected_run is not None and result.detected_run >= 20
    assert result.yes_latest > result.yes_baseline
    assert result.human_agreement_latest < result.human_agreement_baseline
    assert not math.isnan(result.evalue_humans) and result.anchors_latest == 200


def test_unjudged_anchors_are_left_out() -> None:
    runs = np.array([[1.0, 0.0, np.nan], [1.0, np.nan, 0.0], [1.0, 0.0, 0.0]])
    result = evaluate_item(runs, np.array([1.0, np.nan, 0.0]), np.full(runs.shape, 0.5))
    assert not result.drifted and result.anchors_latest == 3 and result.human_agreement_latest == 1.0
