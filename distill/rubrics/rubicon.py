"""RUBICON rubric selection (Biyani et al., AIware 2024): greedy subset search over a scored pool.

Input: ``scores`` (conversations x pool items, each 0-10 from the judge), item ``signs`` (+1 SAT,
-1 DSAT) and labels ``y`` (1 SAT, 0 DSAT). For a subset S, a conversation's NetSAT is
``r = sum_S sign * score``, squashed to ``s = tanh(r / tau)`` with ``tau = 10 * sqrt(|S|)``.

* class separation ``L_C = mean(s | SAT) - mean(s | DSAT)``;
* threshold ``t`` = midpoint of the two class means;
* precision sharpness error ``L_S = mean(max(0, -y' * (s - t)))`` with ``y'`` = +-1: how far
  conversations sit on the wrong side of the threshold, i.e. confident mistakes, which are what
  destroy precision in the confident region (and so the yield at 0.9 precision).

Items are added greedily while ``L_C - alpha * L_S`` improves, within separate SAT and DSAT
budgets; ``alpha`` comes from stratified 5-fold cross-validation (held-out balanced accuracy at
the midpoint threshold). The paper leaves the squashing, the grid and the CV score open; these are
documented in ``docs/rubrics.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.model_selection import StratifiedKFold

from monitor.contracts.errors import ConfigError

ALPHA_GRID: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
_EPS = 1e-9


def tau_for(k: int) -> float:
    """tanh scale for a sum of ``k`` item scores in [0, 10]: keeps the squash out of saturation."""
    return 10.0 * math.sqrt(max(k, 1))


def objective(r: np.ndarray, y: np.ndarray, k: int, alpha: float
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(J, L_C, L_S, t)`` for NetSAT columns ``r`` (n x m, one column per candidate subset of size k);
    0-d arrays for a single column ``r`` (n)."""
    s = np.tanh(r / tau_for(k))
    mu_sat = s[y == 1].mean(axis=0)
    mu_dsat = s[y == 0].mean(axis=0)
    separation = mu_sat - mu_dsat
    threshold = (mu_sat + mu_dsat) / 2
    sign = np.where(y == 1, 1.0, -1.0)[:, None] if s.ndim == 2 else np.where(y == 1, 1.0, -1.0)
    sharpness = np.maximum(0.0, -sign * (s - threshold)).mean(axis=0)
    return separation - alpha * sharpness, separation, sharpness, threshold


@dataclass
class Selection:
    selected: list[int]
    alpha: float
    tau: float
    threshold: float  # on the tanh scale
    threshold_r: float  # the same threshold on the raw NetSAT scale: predict SAT when r > threshold_r
    separation: float
    sharpness: float
    cv: dict[float, float] = field(default_factory=dict)  # alpha -> mean held-out balanced accuracy


def greedy_select(
    scores: np.ndarray, signs: np.ndarray, y: np.ndarray, *, alpha: float, sat_budget: int = 10, dsat_budget: int = 10
) -> list[int]:
    """Indices of the chosen items, in the order they were added."""
    n, p = scores.shape
    signed = scores * signs[None, :]
    chosen: list[int] = []
    r = np.zeros(n)
    best = 0.0  # the empty set: every s = 0, J = 0
    while True:
        used_sat = sum(1 for i in chosen if signs[i] > 0)
        used_dsat = len(chosen) - used_sat
        room = {1.0: used_sat < sat_budget, -1.0: used_dsat < dsat_budget}
        candidates = [j for j in range(p) if j not in chosen and room.get(float(np.sign(signs[j])), False)]
        if not candidates:
            return chosen
        values, *_ = objective(r[:, None] + signed[:, candidates], y, len(chosen) + 1, alpha)
        top = int(np.argmax(values))
        if values[top] <= best + _EPS:
            return chosen
        best = float(values[top])
        chosen.append(candidates[top])
        r = r + signed[:, candidates[top]]


def _fit(scores: np.ndarray, signs: np.ndarray, y: np.ndarray, alpha: float, budgets: tuple[int, int]
         ) -> tuple[list[int], float]:
    chosen = greedy_select(scores, signs, y, alpha=alpha, sat_budget=budgets[0], dsat_budget=budgets[1])
    if not chosen:
        return chosen, 0.0
    r = (scores[:, chosen] * signs[chosen]).sum(axis=1)
    *_, t = objective(r, y, len(chosen), alpha)
    return chosen, float(np.clip(t, -1 + 1e-6, 1 - 1e-6))


def balanced_accuracy(y: np.ndarray, predicted: np.ndarray) -> float:
    recalls = [float((predicted[y == c] == c).mean()) for c in (0, 1) if (y == c).any()]
    return float(np.mean(recalls))


def cross_validate_alpha(
    scores: np.ndarray, signs: np.ndarray, y: np.ndarray, *, grid: tuple[float, ...] = ALPHA_GRID,
    budgets: tuple[int, int] = (10, 10), folds: int = 5, seed: int = 0,
) -> dict[float, float]:
    """Mean held-out balanced accuracy for every alpha of the grid (stratified folds, fixed seed)."""
    splits = min(folds, int(np.bincount(y, minlength=2).min()))
    if splits < 2:
        raise ConfigError(f"RUBICON needs at least 2 SAT and 2 DSAT conversations for cross-validation; got "
                          f"{np.bincount(y, minlength=2).tolist()} (DSAT, SAT)")
    folder = StratifiedKFold(n_splits=splits, shuffle=True, random_state=seed)
    results: dict[float, float] = {}
    for alpha in grid:
        accuracies = []
        for train, test in folder.split(scores, y):
            chosen, t = _fit(scores[train], signs, y[train], alpha, budgets)
            if not chosen:
                accuracies.append(0.5)
                continue
            r = (scores[test][:, chosen] * signs[chosen]).sum(axis=1)
            predicted = (np.tanh(r / tau_for(len(chosen))) > t).astype(int)
            accuracies.append(balanced_accuracy(y[test], predicted))
        results[alpha] = float(np.mean(accuracies))
    return results


def select(
    scores: np.ndarray, signs: np.ndarray, y: np.ndarray, *, sat_budget: int = 10, dsat_budget: int = 10,
    grid: tuple[float, ...] = ALPHA_GRID, folds: int = 5, seed: int = 0,
) -> Selection:
    """Pick alpha by cross-validation, then select on all the training conversations."""
    scores, signs, y = np.asarray(scores, float), np.asarray(signs, float), np.asarray(y, int)
    if scores.shape != (len(y), len(signs)):
        raise ConfigError(f"scores must be (conversations, items) = ({len(y)}, {len(signs)}); got {scores.shape}")
    budgets = (sat_budget, dsat_budget)
    cv = cross_validate_alpha(scores, signs, y, grid=grid, budgets=budgets, folds=folds, seed=seed)
    alpha = max(cv, key=lambda a: (round(cv[a], 9), -a))  # ties go to the smaller alpha
    chosen, t = _fit(scores, signs, y, alpha, budgets)
    if not chosen:
        raise ConfigError("RUBICON selected no item: no pool item separates SAT from DSAT conversations")
    r = (scores[:, chosen] * signs[chosen]).sum(axis=1)
    _, separation, sharpness, _ = objective(r, y, len(chosen), alpha)
    tau = tau_for(len(chosen))
    return Selection(selected=chosen, alpha=alpha, tau=tau, threshold=t, threshold_r=float(tau * math.atanh(t)),
                     separation=float(separation), sharpness=float(sharpness), cv=cv)
