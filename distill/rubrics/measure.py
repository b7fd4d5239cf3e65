"""Scoring labelled conversations with a rubric set, and the metrics rubric sets are compared by.

A conversation's score is the monitor's aggregate ``R`` (sum of SAT item scores minus DSAT ones);
it is predicted SAT when ``R > threshold_r`` (0 for hand-written sets, the RUBICON midpoint for
selected ones, read from ``provenance.selection.threshold_r``). Metrics:

* accuracy, and precision / recall / F1 of the ``positive`` class (SAT by default);
* delta-NetSAT: mean NetSAT of SAT conversations minus that of DSAT ones, NetSAT being
  ``mean(SAT item scores)/10 - mean(DSAT item scores)/10`` in [-1, 1], comparable across sets;
* yield at 0.9 precision (RUBICON): the largest share of conversations that can be labelled with
  two cut-offs on R, SAT above the upper and DSAT below the lower, each side at least 0.9 precise;
  the cut-offs are fit on the data evaluated (an optimistic, in-sample number, as in the paper).

Confidence intervals are percentile bootstraps over conversations, with the same resamples for
every set so sets are compared on equal draws.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from prometheus_client import CollectorRegistry

from distill.rubrics.cache import CachingClient
from monitor.contracts.errors import JudgeResponseError
from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricItem, RubricSet
from monitor.contracts.scores import ItemResult
from monitor.contracts.sections import JudgeSettings, RubricSettings
from monitor.judge.gather import gather_or_cancel
from monitor.judge.likert import LikertScorer
from monitor.judge.logprobs import LogprobsScorer
from monitor.judge.redact import Redactor
from monitor.judge.spur import SpurScorer

Mode = Literal["spur", "likert", "logprobs"]
METRICS = ("accuracy", "precision", "recall", "f1", "delta_netsat", "yield_at_0.9")


async def score_matrix(
    llm: CachingClient, judge: JudgeSettings, rubrics: RubricSettings, items: list[RubricItem],
    conversations: list[Conversation], *,
    mode: Mode, model: str, on_done: Callable[[], None] | None = None, failures: Counter[str] | None = None,
) -> np.ndarray:
    """(conversations x items) judge scores in [0, 10]; a row is NaN when the answer never parsed.

    ``failures`` counts why rows are NaN (the judge's error, e.g. "missing items ..."), for the summary.
    """
    scorers: dict[str, type[SpurScorer | LikertScorer | LogprobsScorer]] = {
        "spur": SpurScorer, "likert": LikertScorer, "logprobs": LogprobsScorer}
    scorer_cls = scorers[mode]
    scorer = scorer_cls(judge, rubrics, llm, Metrics(CollectorRegistry()), items,  # type: ignore[arg-type]
                        model=model)
    redactor = Redactor.from_settings(judge)
    out = np.full((len(conversations), len(items)), np.nan)
    column = {item.id: j for j, item in enumerate(items)}

    async def one(row: int, conversation: Conversation) -> None:
        try:
            scored = await scorer.score_items(redactor.redact_conversation(conversation))
        except JudgeResponseError as exc:
            if failures is not None:  # the row stays NaN; callers drop it and say how many and why
                failures[str(exc)] += 1
        else:
            out[row] = 0.0
            for result in scored.items:
                out[row, column[result.item_id]] = item_score(result)
        if on_done is not None:
            on_done()

    await gather_or_cancel(one(i, c) for i, c in enumerate(conversations))
    return out


def item_score(result: ItemResult) -> float:
    """An item's score on the 0-10 scale the metrics use: the judge's score (SPUR, Likert), or ten times
    P(yes) in logprobs mode, which gives a probability and no score."""
    if result.score is None and result.probability is not None:
        return 10.0 * result.probability
    return result.score or 0.0


def signs_of(items: list[RubricItem]) -> np.ndarray:
    return np.array([1.0 if i.polarity == "sat" else -1.0 if i.polarity == "dsat" else 0.0 for i in items])


def netsat(scores: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Per conversation: mean SAT item score / 10 minus mean DSAT item score / 10."""
    out = np.zeros(scores.shape[0])
    for sign in (1.0, -1.0):
        if (signs == sign).any():
            out += sign * scores[:, signs == sign].mean(axis=1) / 10.0
    return out


def _largest_precise_prefix(hits: np.ndarray, values: np.ndarray, target: float) -> np.ndarray:
    """Prefix sizes k (sorted order) whose precision reaches ``target`` and that do not split ties."""
    k = np.arange(1, len(hits) + 1)
    precise = np.cumsum(hits) / k >= target - 1e-12
    boundary = np.append(values[:-1] != values[1:], True)
    return np.concatenate([[0], k[precise & boundary]])


def yield_at_precision(y: np.ndarray, score: np.ndarray, target: float = 0.9) -> float:
    """Largest share labelled by a SAT cut-off (top) and a DSAT cut-off (bottom), each >= target precise."""
    n = len(y)
    if n == 0:
        return float("nan")
    down = np.argsort(-score, kind="stable")
    up = down[::-1]
    sat_ks = _largest_precise_prefix(y[down] == 1, score[down], target)
    dsat_ks = np.sort(_largest_precise_prefix(y[up] == 0, score[up], target))
    best = 0
    for k_sat in sat_ks:  # the DSAT side may take at most the conversations the SAT side left
        k_dsat = dsat_ks[np.searchsorted(dsat_ks, n - k_sat, side="right") - 1]
        best = max(best, int(k_sat + k_dsat))
    return best / n


def point_metrics(y: np.ndarray, r: np.ndarray, ns: np.ndarray, threshold_r: float, positive: str) -> dict[str, float]:
    predicted_sat = r > threshold_r
    truth = y == 1 if positive == "sat" else y == 0
    guess = predicted_sat if positive == "sat" else ~predicted_sat
    tp = float((truth & guess).sum())
    precision = tp / guess.sum() if guess.any() else 0.0
    recall = tp / truth.sum() if truth.any() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    delta = ns[y == 1].mean() - ns[y == 0].mean() if (y == 1).any() and (y == 0).any() else float("nan")
    return {"accuracy": float((predicted_sat == (y == 1)).mean()), "precision": float(precision),
            "recall": float(recall), "f1": float(f1), "delta_netsat": float(delta),
            "yield_at_0.9": yield_at_precision(y, r, 0.9)}


@dataclass
class SetReport:
    name: str
    key: str
    n: int
    failed: int
    threshold_r: float
    values: dict[str, float]
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)  # why the failed conversations failed

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: an undefined metric or interval (no conversations, one class only) is None."""
        return {"name": self.name, "rubric_key": self.key, "conversations": self.n, "failed": self.failed,
                "threshold_r": self.threshold_r, "metrics": {k: finite(v) for k, v in self.values.items()},
                "ci95": {k: [finite(x) for x in v] for k, v in self.ci.items()}, "failures": self.failures}


def finite(value: float | None) -> float | None:
    """``value``, or None when it is NaN or infinite (strict JSON has neither)."""
    return value if value is not None and math.isfinite(value) else None


def threshold_of(rubric: RubricSet) -> float:
    selection = rubric.provenance.get("selection") or {}
    return float(selection.get("threshold_r", 0.0))


def evaluate_set(
    name: str, rubric: RubricSet, scores: np.ndarray, y: np.ndarray, *, positive: str = "sat",
    resamples: np.ndarray | None = None,
) -> SetReport:
    """Metrics (and bootstrap CIs over ``resamples``, rows of indices) for one scored rubric set."""
    ok = ~np.isnan(scores).any(axis=1)
    signs = signs_of(list(rubric.items))
    s, labels = scores[ok], y[ok]
    r, ns, t = (s * signs).sum(axis=1), netsat(s, signs), threshold_of(rubric)
    if not len(labels):  # every answer failed: nothing is measured, every metric is undefined
        return SetReport(name, rubric.key, 0, int((~ok).sum()), t, dict.fromkeys(METRICS, math.nan))
    report = SetReport(name, rubric.key, int(ok.sum()), int((~ok).sum()), t, point_metrics(labels, r, ns, t, positive))
    if resamples is not None:
        draws = [point_metrics(y[idx], (scores[idx] * signs).sum(axis=1), netsat(scores[idx], signs), t, positive)
                 for idx in (row[ok[row]] for row in resamples)]
        for metric in METRICS:
            values = np.array([d[metric] for d in draws], dtype=float)
            lo, hi = np.nanpercentile(values, [2.5, 97.5]) if np.isfinite(values).any() else (np.nan, np.nan)
            report.ci[metric] = (float(lo), float(hi))
    return report


def bootstrap_indices(n: int, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))
