"""Cross-validation, held-out evaluation, hyper-parameter search and metrics for calibration.

Folds are grouped by dialogue (all labels of one dialogue sit in one fold), so a model never sees
another annotator's answer for a test dialogue. Hyper-parameters are chosen by the mean held-out
log-likelihood of the target question, as in the paper. Metrics follow the paper (RMSE, Pearson,
Spearman, Kendall on the expected answer) plus the smoothed ECE of P(satisfied) = P(answer >= 3),
the quantity the monitor exports.

References
----------
Błasiak, Gopalan, Hu, Nakkiran. "Smooth ECE: Principled Reliability Diagrams via Kernel Smoothing."
arXiv:2309.12236, 2023.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from distill.calibration.baselines import BASELINE_NAMES, default_baselines
from distill.calibration.data import CalibrationSet
from distill.calibration.network import LLMRubricCalibrator, satisfied_probability

__all__ = [
    "DEFAULT_GRID",
    "Evaluation",
    "cross_val_predict",
    "dialogue_folds",
    "evaluate",
    "grid_search",
    "score",
    "smooth_ece",
]

#: Small grid for a 2-core machine (16 configurations); the paper searched 6,615.
DEFAULT_GRID: dict[str, list[Any]] = {
    "hidden1": [25, 50],
    "pretrain_epochs": [5, 20],
    "finetune_epochs": [10, 30],
    "weight_decay": [0.0, 0.01],
}

Factory = Callable[[], Any]


def kernel_smooth(f: np.ndarray, r: np.ndarray, sigma: float, t: np.ndarray, *, bins: int = 512
                  ) -> np.ndarray:
    """(1/n) sum_i K(t, f_i) r_i with a Gaussian kernel folded into [0, 1] (mirror images at 2k ± f).

    Predictions are first summed into ``bins`` equal bins, so the cost does not grow with n.
    """
    weights, edges = np.histogram(np.clip(f, 0.0, 1.0), bins=bins, range=(0.0, 1.0), weights=r)
    mid = 0.5 * (edges[:-1] + edges[1:])
    out = np.zeros_like(t)
    for centre in [2 * k + s * mid for k in (-1, 0, 1) for s in (1, -1)]:
        z = (t[:, None] - centre[None, :]) / sigma
        out += (np.exp(-0.5 * z**2) @ weights) / (sigma * np.sqrt(2 * np.pi))
    return out / len(f)


def smooth_ece(probs: np.ndarray, outcomes: np.ndarray, *, bandwidth: float | None = None,
               grid: int = 256) -> float:
    """Smoothed ECE of binary predictions: ``∫ |E[(y - f) K(t, f)]| dt``.

    Without ``bandwidth``, the fixed point ``smECE_σ = σ`` is found by bisection (smECE_σ falls as σ
    grows), as Błasiak et al. recommend; it needs no bin choice and is stable on few samples.

    >>> round(smooth_ece(np.full(1000, 0.5), np.tile([0, 1], 500)), 4)
    0.0
    >>> smooth_ece(np.full(1000, 0.9), np.zeros(1000)) > 0.5
    True
    """
    f = np.clip(np.asarray(probs, dtype=np.float64), 0.0, 1.0)
    r = np.asarray(outcomes, dtype=np.float64) - f
    t = np.linspace(0.0, 1.0, grid)

    def at(sigma: float) -> float:
        return float(np.trapezoid(np.abs(kernel_smooth(f, r, sigma, t)), t))

    if bandwidth is not None:
        return at(bandwidth)
    lo, hi = 1e-4, 1.0
    for _ in range(25):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if at(mid) > mid else (lo, mid)
    return at(hi)


def score(y: np.ndarray, pred: np.ndarray, proba: np.ndarray | None, classes: np.ndarray, *,
          threshold: int = 3) -> dict[str, float]:
    """Paper metrics on expected answers, plus log-likelihood and smoothed ECE when there is a proba."""
    y, pred = np.asarray(y, dtype=np.float64), np.asarray(pred, dtype=np.float64)
    flat = np.ptp(pred) == 0
    out = {
        "rmse": float(np.sqrt(np.mean((y - pred) ** 2))),
        "pearson": float("nan") if flat else float(stats.pearsonr(y, pred)[0]),
        "spearman": float("nan") if flat else float(stats.spearmanr(y, pred)[0]),
        "kendall": float("nan") if flat else float(stats.kendalltau(y, pred)[0]),
        "n": int(len(y)),
    }
    if proba is not None:
        p_true = np.asarray(proba)[np.arange(len(y)), y.astype(int) - 1]
        out["log_likelihood"] = float(np.mean(np.log(np.clip(p_true, 1e-12, None))))
        sat = satisfied_probability(proba, classes, threshold=threshold)
        out["smooth_ece"] = smooth_ece(sat, y >= threshold)
    return out


def dialogue_folds(groups: Sequence[str] | np.ndarray, *, n_splits: int = 5, random_state: int = 43
                   ) -> np.ndarray:
    """Fold number per row: dialogues shuffled with the seed, then dealt round-robin (as the paper)."""
    ids = sorted(set(np.asarray(groups).tolist()))
    if len(ids) < n_splits:
        raise ValueError(f"Cannot make {n_splits} folds from {len(ids)} dialogues.")
    np.random.default_rng(random_state).shuffle(ids)
    fold_of = {d: i % n_splits for i, d in enumerate(ids)}
    return np.asarray([fold_of[g] for g in np.asarray(groups).tolist()])


def _fit_predict(factory: Factory, train: CalibrationSet, rows_tr: np.ndarray, test: CalibrationSet,
                 rows_te: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any]:
    model = factory().fit(train.X[rows_tr], train.labels[rows_tr], judges=train.judges[rows_tr])
    X_te, j_te = test.X[rows_te], test.judges[rows_te]
    return model.predict(X_te, judges=j_te), model.predict_proba(X_te, judges=j_te), model


def cross_val_predict(factory: Factory, data: CalibrationSet, folds: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold expected answers and target distributions for every row."""
    pred = np.zeros(len(data))
    proba: np.ndarray | None = None
    for k in np.unique(folds):
        p, pr, _ = _fit_predict(factory, data, folds != k, data, folds == k)
        proba = np.zeros((len(data), pr.shape[1])) if proba is None else proba
        pred[folds == k], proba[folds == k] = p, pr
    assert proba is not None
    return pred, proba


def grid_search(data: CalibrationSet, grid: Mapping[str, Sequence[Any]], folds: np.ndarray, *,
                base: Mapping[str, Any] | None = None) -> list[tuple[dict[str, Any], float]]:
    """Every grid point with its mean held-out target log-likelihood, best first."""
    results = []
    names = list(grid)
    for values in itertools.product(*(grid[n] for n in names)):
        params = {**(base or {}), **dict(zip(names, values, strict=True))}
        lls = []
        for k in np.unique(folds):
            tr, te = folds != k, folds == k
            model = LLMRubricCalibrator(**params).fit(data.X[tr], data.labels[tr], judges=data.judges[tr])
            lls.append(model.log_likelihood(data.X[te], data.labels[te], judges=data.judges[te]))
        results.append((params, float(np.mean(lls))))
    return sorted(results, key=lambda item: -item[1])


@dataclass
class Evaluation:
    """Scores of LLM-Rubric and the baselines, plus the predictions the report plots."""

    target: str
    protocol: str
    hyperparameters: dict[str, Any]
    scores: dict[str, dict[str, float]]
    y: np.ndarray
    predictions: dict[str, tuple[np.ndarray, np.ndarray]] = field(repr=False)
    classes: np.ndarray = field(repr=False)
    dialogue_level: dict[str, dict[str, float]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The CLI's JSON: the headline metrics of LLM-Rubric, then every baseline."""
        main = self.scores["llm_rubric"]
        return {"target": self.target, **{k: main[k] for k in ("rmse", "pearson", "spearman", "kendall")},
                "smooth_ece": main.get("smooth_ece"), "log_likelihood": main.get("log_likelihood"),
                "n": main["n"], "protocol": self.protocol, "hyperparameters": self.hyperparameters,
                "baselines": {k: v for k, v in self.scores.items() if k != "llm_rubric"},
                "dialogue_level": self.dialogue_level}


def _dialogue_means(groups: np.ndarray, values: np.ndarray) -> np.ndarray:
    _, inverse = np.unique(groups.astype(str), return_inverse=True)
    return np.bincount(inverse, weights=values) / np.bincount(inverse)


def evaluate(train: CalibrationSet, test: CalibrationSet | None = None, *,
             params: Mapping[str, Any] | None = None, grid: Mapping[str, Sequence[Any]] | None = None,
             n_splits: int = 5, random_state: int = 43) -> Evaluation:
    """Score LLM-Rubric and the baselines by grouped CV on ``train``, or train on it and test on ``test``.

    With ``grid``, hyper-parameters are picked by grouped CV log-likelihood on ``train`` (with no test
    set this reuses the evaluation folds, the paper's protocol, which flatters every grid point alike).
    """
    if test is not None and (test.questions != train.questions or test.target != train.target):
        raise ValueError(f"train and test sets ask different questions: {train.questions} vs {test.questions}")
    base = {"target_index": train.target_index, "n_options": train.n_options.tolist(),
            "random_state": random_state, **(params or {})}
    folds = dialogue_folds(train.groups, n_splits=n_splits, random_state=random_state)
    if grid:
        base = grid_search(train, grid, folds, base=base)[0][0]
    def make(name: str) -> Any:
        return default_baselines(target_index=train.target_index, n_options=train.n_options,
                                 calibrator_params=base, random_state=random_state)[name]

    factories: dict[str, Factory] = {"llm_rubric": lambda: LLMRubricCalibrator(**base)}
    factories |= {name: functools.partial(make, name) for name in BASELINE_NAMES}
    ref = test if test is not None else train
    y = ref.labels[:, ref.target_index]
    predictions: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, factory in factories.items():
        if test is None:
            predictions[name] = cross_val_predict(factory, train, folds)
        else:
            everything = np.ones(len(train), bool)
            predictions[name] = _fit_predict(factory, train, everything, test, np.ones(len(test), bool))[:2]
    classes = np.arange(1, int(ref.n_options[ref.target_index]) + 1)
    scores = {n: score(y, p, pr, classes) for n, (p, pr) in predictions.items()}
    groups = ref.groups
    dialogue_level = {n: score(_dialogue_means(groups, y), _dialogue_means(groups, p), None, classes)
                      for n, (p, _) in predictions.items() if n != "random"}
    protocol = (f"{n_splits}-fold CV grouped by dialogue" if test is None else "train on train set, test on test set")
    hp = {k: v for k, v in base.items() if k not in ("n_options", "target_index")}
    return Evaluation(train.target, protocol, hp, scores, y, predictions, classes, dialogue_level)
