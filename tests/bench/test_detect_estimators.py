"""The prediction-powered rate of ``bench detect``: unbiased, and its 95 % interval covers the truth at about 95 %,
on simulated populations with a known rate and a distilled model of any quality (useless ones included)."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from bench.detect_estimators import Z95, ppi_estimate, ppi_from_sums

REPEATS = 400


def _population(rng: np.random.Generator, n: int, theta: float, signal: float, bias: float) -> tuple[np.ndarray, ...]:
    """Labels with P(y) = theta, and a model whose logit carries ``signal`` x (y - 0.5) plus noise and ``bias``."""
    y = (rng.random(n) < theta).astype(float)
    f = 1 / (1 + np.exp(-(signal * (y - 0.5) + rng.normal(0, 1, n) + bias)))
    return y, f


@settings(max_examples=12, deadline=None)
@given(theta=st.floats(0.03, 0.5), signal=st.floats(0.0, 4.0), bias=st.floats(-2.0, 2.0),
       rate=st.floats(0.05, 0.3), n=st.integers(1500, 5000), boost=st.sampled_from([1.0, 3.0]),
       seed=st.integers(0, 2**32 - 1))
def test_ppi_is_unbiased_and_its_interval_covers_the_truth(theta: float, signal: float, bias: float, rate: float,
                                                           n: int, boost: float, seed: int) -> None:
    """``boost`` > 1 judges the uncertain conversations (0.3 < f < 0.7) more often, as the sampler does: the 1/pi
    weights must keep the estimate unbiased. A normal interval needs some judged positives: >= 20 expected."""
    assume(theta * rate * n >= 20)
    rng = np.random.default_rng(seed)
    estimates, covered = np.zeros(REPEATS), np.zeros(REPEATS, dtype=bool)
    for k in range(REPEATS):
        y, f = _population(rng, n, theta, signal, bias)
        pi = np.where((f > 0.3) & (f < 0.7), min(1.0, rate * boost), rate)
        judged = rng.random(n) < pi
        got = ppi_estimate(f, f[judged], y[judged], pi[judged])
        estimates[k] = got.rate
        covered[k] = abs(got.rate - theta) <= Z95 * got.se
    spread = estimates.std(ddof=1) / np.sqrt(REPEATS)
    assert abs(estimates.mean() - theta) < 4.5 * spread + 1e-3  # unbiased: within sampling error of the mean
    assert 0.91 <= covered.mean() <= 0.99  # nominal 95 %; sd of a 400-run coverage is about 1.1 points


def test_the_distilled_mean_alone_is_biased_where_ppi_is_not() -> None:
    """The same checks can fail: a biased model's mean misses theta by far more than the sampling error."""
    rng = np.random.default_rng(3)
    y, f = _population(rng, 5000, 0.1, 0.5, 1.5)
    assert f.mean() - y.mean() > 0.3
    judged = rng.random(5000) < 0.1
    got = ppi_estimate(f, f[judged], y[judged], np.full(judged.sum(), 0.1))
    assert abs(got.rate - y.mean()) < 4 * got.se


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(50, 3000), rate=st.floats(0.05, 1.0))
def test_the_benchmark_sums_equal_the_unit_level_estimate_for_a_uniform_slice(seed: int, n: int, rate: float) -> None:
    rng = np.random.default_rng(seed)
    y, f = _population(rng, n, 0.2, 2.0, 0.0)
    judged = rng.random(n) < rate
    if judged.sum() < 2:
        return
    unit = ppi_estimate(f, f[judged], y[judged], np.full(judged.sum(), rate))
    r = y[judged] - f[judged]
    rate_s, se_s = ppi_from_sums(np.array([n]), np.array([f.sum()]), np.array([judged.sum()]), np.array([r.sum()]),
                                 np.array([(r * r).sum()]), rate)
    assert np.isclose(rate_s[0], unit.rate) and np.isclose(se_s[0], unit.se)
