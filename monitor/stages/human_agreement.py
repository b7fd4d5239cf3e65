"""Judge-vs-human agreement per rubric item, from a review sample drawn with known inclusion probabilities.

Every reviewed conversation carries the judge's verdict ``j``, the reviewer's ``h``, its inclusion probability
``pi`` in the review sample (:mod:`monitor.stages.review_queue`) and its weight ``a`` in the population the judge
saw (``1 / pi_judge`` of the judge slice; 1 for a plain count). Agreement, Cohen's kappa, precision and recall are
smooth functions of four Horvitz-Thompson totals, the weighted cells ``(j, h)`` of the confusion table; their
95 % intervals come from the delta method with the Poisson-sampling variance ``sum (1 - pi) / pi^2 * y y^T``
(Sarndal, Swensson & Wretman, *Model Assisted Survey Sampling*, 1992, ch. 5). What they estimate is the value the
whole judged population would give if every conversation were reviewed, whatever share of flagged and
unflagged conversations the queue asked people to look at.

The human-corrected rate is prediction-powered (Angelopoulos et al., *Prediction-powered inference*, Science
2023): the judge's rate over every judged conversation plus the review sample's weighted mean correction
``h - j``. Only the correction is estimated, so its interval is as narrow as the judge is right.

>>> import numpy as np
>>> judge, human = np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0])
>>> stats = agreement_stats(judge, human, pi=np.ones(4))
>>> stats["agreement"].value, stats["precision"].value, stats["recall"].value
(0.75, 0.5, 1.0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

Z95 = 1.959963984540054
STATS = ("agreement", "kappa", "precision", "recall")
Vector = NDArray[np.float64]


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its 95 % interval; ``value`` is None when no reviewed conversation defines it."""

    value: float | None
    low: float | None = None
    high: float | None = None


def _cells(judge: Vector, human: Vector) -> Vector:
    """One row per conversation: indicators of the confusion cells (j=1,h=1), (j=1,h=0), (j=0,h=1), (j=0,h=0)."""
    return np.stack([judge * human, judge * (1 - human), (1 - judge) * human, (1 - judge) * (1 - human)], axis=1)


def _agreement(t: Vector) -> float:
    return float((t[0] + t[3]) / t.sum())


def _precision(t: Vector) -> float:
    return float(t[0] / (t[0] + t[1]))


def _recall(t: Vector) -> float:
    return float(t[0] / (t[0] + t[2]))


def _kappa(t: Vector) -> float:
    n = t.sum()
    observed = (t[0] + t[3]) / n
    p_judge, p_human = (t[0] + t[1]) / n, (t[0] + t[2]) / n
    chance = p_judge * p_human + (1 - p_judge) * (1 - p_human)
    return float((observed - chance) / (1 - chance))


FUNCTIONS: dict[str, tuple[Callable[[Vector], float], tuple[int, ...], float]] = {
    # name: (function of the totals, the cells its denominator needs, lowest value)
    "agreement": (_agreement, (0, 1, 2, 3), 0.0),
    "kappa": (_kappa, (0, 1, 2, 3), -1.0),
    "precision": (_precision, (0, 1), 0.0),
    "recall": (_recall, (0, 2), 0.0),
}


def _delta(f: Callable[[Vector], float], totals: Vector, cov: Vector, low: float) -> Estimate:
    """``f(totals)`` with a delta-method interval (central differences on the totals)."""
    value = f(totals)
    if not np.isfinite(value):
        return Estimate(None)
    gradient = np.zeros(len(totals))
    for k in range(len(totals)):
        step = 1e-6 * max(totals[k], 1.0)
        up, down = totals.copy(), totals.copy()
        up[k] += step
        down[k] = max(down[k] - step, 0.0)
        gradient[k] = (f(up) - f(down)) / (up[k] - down[k])
    se = float(np.sqrt(max(float(gradient @ cov @ gradient), 0.0)))
    return Estimate(value, max(low, value - Z95 * se), min(1.0, value + Z95 * se))


def agreement_stats(judge: ArrayLike, human: ArrayLike, pi: ArrayLike,
                    weight: ArrayLike | None = None) -> dict[str, Estimate]:
    """Agreement, kappa, precision and recall of the judge against people, each with its 95 % interval."""
    j, h, p = (np.asarray(x, dtype=np.float64) for x in (judge, human, pi))
    a = np.ones_like(j) if weight is None else np.asarray(weight, dtype=np.float64)
    if not (len(j) == len(h) == len(p) == len(a)):
        raise ValueError("judge, human, pi and weight must have one entry per reviewed conversation")
    if len(p) and (p.min() <= 0 or p.max() > 1):
        raise ValueError("inclusion probabilities must be in (0, 1]")
    y = _cells(j, h) * a[:, None]
    totals = (y / p[:, None]).sum(axis=0) if len(p) else np.zeros(4)
    scaled = y * (np.sqrt(1 - p) / p)[:, None]
    cov = scaled.T @ scaled
    out = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for name, (f, needed, low) in FUNCTIONS.items():
            out[name] = _delta(f, totals, cov, low) if totals[list(needed)].sum() > 0 else Estimate(None)
    return out


def corrected_rate(judged_yes: float, judged_total: float, judge: ArrayLike, human: ArrayLike, pi: ArrayLike,
                   weight: ArrayLike | None = None) -> Estimate:
    """The item's rate over the judged conversations as people would label it: the judge's rate
    ``judged_yes / judged_total`` (weighted sums over every judged conversation) plus the review sample's
    Horvitz-Thompson mean of ``h - j``, with the correction's 95 % interval."""
    j, h, p = (np.asarray(x, dtype=np.float64) for x in (judge, human, pi))
    a = np.ones_like(j) if weight is None else np.asarray(weight, dtype=np.float64)
    if judged_total <= 0:
        return Estimate(None)
    d = a * (h - j)
    value = (judged_yes + float((d / p).sum())) / judged_total
    se = float(np.sqrt(((1 - p) / p**2 * d**2).sum())) / judged_total
    return Estimate(value, max(0.0, value - Z95 * se), min(1.0, value + Z95 * se))
