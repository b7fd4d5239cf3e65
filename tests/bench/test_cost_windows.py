"""The count-based window estimators of ``bench cost``: exact cases and the sampling error's scale."""

from __future__ import annotations

import numpy as np

from bench.cost_windows import Regime, window_errors


def _pool(n: int, rate: float, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random((n, 2)) < rate).astype(float)


def test_a_perfect_model_makes_both_corrections_exact() -> None:
    a, b = _pool(500, 0.1, 0), _pool(500, 0.4, 1)
    errors = window_errors([Regime(a, a.copy()), Regime(b, b.copy())], 10_000, 0.01, 30, np.random.default_rng(0))
    assert np.abs(errors["distilled_only"]).max() < 1e-9 and np.abs(errors["ppi"]).max() < 1e-9
    # lambda = 1 / (1 + n/N) shrinks a perfect model by ~1 %: a fraction of judge-only's sampling error
    assert np.abs(errors["ppi_tuned"]).max() < 0.3 < 2 < np.abs(errors["judge_only"]).max()


def test_a_constant_model_leaves_the_tuned_estimator_at_judge_only() -> None:
    a, b = _pool(500, 0.1, 2), _pool(500, 0.4, 3)
    flat = [Regime(x, np.full_like(x, 0.25)) for x in (a, b)]
    errors = window_errors(flat, 10_000, 0.05, 30, np.random.default_rng(1))
    assert np.allclose(errors["ppi_tuned"], errors["judge_only"])
    assert np.abs(errors["distilled_only"]).max() > 5  # a constant cannot follow the mix


def test_judge_only_error_shrinks_with_the_square_root_of_the_judged_count() -> None:
    pool = [Regime(_pool(1000, 0.3, 4), np.full((1000, 2), 0.3))]
    small = window_errors(pool, 10_000, 0.01, 400, np.random.default_rng(2))["judge_only"]
    large = window_errors(pool, 1_000_000, 0.01, 400, np.random.default_rng(3))["judge_only"]
    ratio = np.percentile(np.abs(small), 95) / np.percentile(np.abs(large), 95)
    assert 7 < ratio < 14  # 100x the judged conversations: about 10x less error
