"""The rate estimators of ``bench cost`` over simulated 1-hour windows, computed from counts.

A window of ``volume`` conversations drawn with replacement from a labelled pool is fully described
by how often each pool row was drawn (a multinomial) and how often it was judged (a binomial of that
count with the slice's rate). Every estimator is a ratio of count-weighted sums, so a window costs
O(pool) whatever its volume: the same distribution as drawing each conversation, but a 1M/hour
stream runs as fast as a 10k/hour one.

Estimators of one item's rate, each compared with the rate judging all of the window would export:

* ``judge_only``: the judged share's mean (the Hajek rate of a uniform slice);
* ``distilled_only``: the mean distilled probability over the whole window;
* ``ppi``: prediction-powered (difference) estimator, the distilled mean plus the judged slice's mean
  residual (Angelopoulos et al., Science 2023);
* ``ppi_tuned``: PPI++ (Angelopoulos et al., 2023, arXiv:2311.01453): the residual is taken against
  lambda * probability, with lambda = Cov(y, f) / ((1 + n/N) Var(f)) estimated on the judged slice and
  clipped to [0, 1], so a weak model falls back towards judge-only instead of adding its noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ESTIMATORS = ("judge_only", "distilled_only", "ppi", "ppi_tuned")


@dataclass(frozen=True)
class Regime:
    """One evaluation pool: labels (rows, items) and the distilled probabilities for the same rows."""

    labels: np.ndarray
    proba: np.ndarray


def window_errors(regimes: Sequence[Regime], volume: int, rate: float, windows: int,
                  rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per estimator, a (windows, items) array of errors in points against the judge-all-traffic rate.

    Each window mixes the first two regimes in a uniform random share, so rates (and a distilled
    model's bias) move from hour to hour.
    """
    items = regimes[0].labels.shape[1]
    errors = {e: np.zeros((windows, items)) for e in ESTIMATORS}
    for w in range(windows):
        share = rng.random() if len(regimes) > 1 else 0.0
        second = int(rng.binomial(volume, share))
        drawn = [volume - second, second][: len(regimes)]
        sums = np.zeros((6, items))  # all: y, f; judged: y, f, y*f, f*f
        n = 0.0
        for regime, n_k in zip(regimes[:2], drawn, strict=False):
            if n_k == 0:
                continue
            rows = len(regime.labels)
            counts = rng.multinomial(n_k, np.full(rows, 1.0 / rows))
            judged = rng.binomial(counts, rate).astype(float)
            y, f = regime.labels, regime.proba
            sums += np.stack([counts @ y, counts @ f, judged @ y, judged @ f, judged @ (y * f), judged @ (f * f)])
            n += judged.sum()
        target, f_all = sums[0] / volume, sums[1] / volume
        errors["distilled_only"][w] = 100 * (f_all - target)
        if n == 0:  # nothing judged this hour: judge-only has no rate, the corrections nothing to correct with
            errors["judge_only"][w] = np.nan
            errors["ppi"][w] = errors["ppi_tuned"][w] = 100 * (f_all - target)
            continue
        y_mean, f_mean = sums[2] / n, sums[3] / n
        errors["judge_only"][w] = 100 * (y_mean - target)
        errors["ppi"][w] = 100 * (f_all + y_mean - f_mean - target)
        cov = sums[4] / n - y_mean * f_mean
        var = sums[5] / n - f_mean**2
        lam = np.clip(np.divide(cov, (1 + n / volume) * var, out=np.zeros(items), where=var > 1e-12), 0.0, 1.0)
        errors["ppi_tuned"][w] = 100 * (lam * f_all + y_mean - lam * f_mean - target)
    return errors
