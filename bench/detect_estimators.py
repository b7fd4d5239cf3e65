"""The rate estimators ``bench detect`` compares at equal judge spend, and the alert over each.

From one stream's per-minute sums (:data:`STATS`) each estimator gives, at every evaluation minute,
its 30-minute rate and the shipped alert's condition (:mod:`bench.detect_rule`):

* ``judge``: the judged slice alone, the Hajek ratio sum(w y) / sum(w) with w = 1/pi (the worker's
  exported judge rate; the slice is uniform here, so it is the judged share); the rule reads its
  yes / judged counts;
* ``distilled_mean``: the mean calibrated probability over every conversation; the rule reads it as a
  ratio over all scored conversations;
* ``distilled_verdicts``: the share of conversations whose probability passes the item's F1 threshold,
  which is what the shipped rule reads for ``scorer="distilled"`` (``convmon_rubric_verdicts_total``);
* ``ppi``: prediction-powered (Angelopoulos et al., Science 2023): the distilled mean plus the judged
  slice's mean residual y - f weighted by 1/pi, with standard error sqrt((1 - pi) Var(y - f) / n +
  theta (1 - theta) / N) (:func:`ppi_estimate` says why): the shipped ``ConvmonDsatSpikeCorrected`` on
  the live corrected rate (docs/metrics.md). The rule's z uses that error
  (:func:`~bench.detect_rule.condition_with_se`), its volume guard counts the scored
  conversations the rate covers, and its second guard the judged ones (``min_judged``; the slice is uniform,
  so Kish's effective count is the judged count);
* ``ppi_judged_guard``: the same rate and z, with the volume guard on the judged conversations (as
  ``judge``), which separates what the correction adds from what the guard's count lets through.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.detect_rule import SpikeRule, condition, condition_with_se, window_sums

ESTIMATORS = ("judge", "distilled_mean", "distilled_verdicts", "ppi", "ppi_judged_guard")
# Per-minute sums: N conversations, F sum f, V distilled yes verdicts, T judge label of all
# traffic (the target: the rate judging every conversation would export), n judged, Y judged yes,
# R judged residuals y - f, R2 their squares.
STATS = ("N", "F", "V", "T", "n", "Y", "R", "R2")
Z95 = 1.959964


@dataclass(frozen=True)
class PpiEstimate:
    rate: float
    se: float


def ppi_estimate(f_all: np.ndarray, f_judged: np.ndarray, y_judged: np.ndarray,
                 pi_judged: np.ndarray) -> PpiEstimate:
    """The prediction-powered rate of one population from its units: every conversation's probability
    ``f_all`` and the judged ones' (f, binary y, inclusion probability pi), judged independently (Poisson
    sampling, as the router's hash draw).

    The residual mean is the Hajek ratio with weights w = 1/pi. Its standard error: the slice is drawn
    from the same conversations the distilled mean covers, so (unlike PPI with an independent labelled
    sample) Var(f)/N does not add; what adds is the design variance of the residual mean, sum (1 - pi)
    w^2 (r - r_bar)^2 / (sum w)^2, plus theta (1 - theta) / N for the population's own sampling, so the
    interval is for the rate of the process that produced the conversations, as the rule's binomial
    error of the judge slice is. This is the formula of the shipped recording rules (group
    ``convmon-corrected-rates``, docs/metrics.md), which expand it into counted sums."""
    w = 1.0 / np.asarray(pi_judged, dtype=float)
    r = np.asarray(y_judged, dtype=float) - np.asarray(f_judged, dtype=float)
    n, big_n = len(r), len(f_all)
    if n < 2 or big_n < 2:
        return PpiEstimate(float("nan"), float("nan"))
    r_bar = float(np.sum(w * r) / np.sum(w))
    design = float(np.sum((1 - 1 / w) * w**2 * (r - r_bar) ** 2) / np.sum(w) ** 2)
    rate = float(np.mean(f_all)) + r_bar
    theta = min(max(rate, 0.0), 1.0)
    return PpiEstimate(rate, float(np.sqrt(design + theta * (1 - theta) / big_n)))


def ppi_from_sums(N: np.ndarray, F: np.ndarray, n: np.ndarray, R: np.ndarray, R2: np.ndarray,
                  pi: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`ppi_estimate` from sums, for a uniform slice of inclusion probability ``pi`` (the 1/pi weights cancel
    in the rate; the variance weights q = w (w - 1) give (1 - pi) sum((r - r_bar)^2) / n^2): (rate, se)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = (N >= 2) & (n >= 2)
        rate = np.where(ok, F / N + R / n, np.nan)
        theta = np.clip(rate, 0.0, 1.0)
        se = np.sqrt((1 - pi) * np.maximum(R2 - R**2 / n, 0) / n**2 + theta * (1 - theta) / N)
    return rate, np.where(ok, se, np.nan)


@dataclass
class Series:
    """One estimator over a stream: its 30-minute rate, standard error (NaN where it has none) and the
    alert condition, at every evaluation minute."""

    rate: np.ndarray
    se: np.ndarray
    condition: np.ndarray


def estimate(stats: dict[str, np.ndarray], rule: SpikeRule, pi: float) -> tuple[np.ndarray, dict[str, Series]]:
    """The target rate (judging all traffic) and every estimator's :class:`Series` over a stream whose judged
    slice has inclusion probability ``pi``."""
    w = {k: window_sums(stats[k], rule) for k in STATS}
    (N, N_b), (n, n_b) = w["N"], w["n"]
    with np.errstate(invalid="ignore", divide="ignore"):
        target = np.where(N > 0, w["T"][0] / N, np.nan)
        judge = np.where(n > 0, w["Y"][0] / n, np.nan)
        mean = np.where(N > 0, w["F"][0] / N, np.nan)
        verdicts = np.where(N > 0, w["V"][0] / N, np.nan)
        ppi_w, se_w = ppi_from_sums(N, w["F"][0], n, w["R"][0], w["R2"][0], pi)
        ppi_b, se_b = ppi_from_sums(N_b, w["F"][1], n_b, w["R"][1], w["R2"][1], pi)
        nan = np.full(len(N), np.nan)
        out = {
            "judge": Series(judge, np.sqrt(judge * (1 - judge) / n), condition(stats["Y"], stats["n"], rule)),
            "distilled_mean": Series(mean, nan, condition(stats["F"], stats["N"], rule)),
            "distilled_verdicts": Series(verdicts, nan, condition(stats["V"], stats["N"], rule)),
            "ppi": Series(ppi_w, se_w, condition_with_se(ppi_w, se_w, ppi_b, se_b, N, n, rule)),
            "ppi_judged_guard": Series(ppi_w, se_w, condition_with_se(ppi_w, se_w, ppi_b, se_b, n, n, rule)),
        }
    return target, out
