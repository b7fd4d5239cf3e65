"""Cross-validation, held-out evaluation, hyper-parameter search and metrics for calibration.

Folds are grouped by dialogue (all labels of one dialogue sit in one fold), so a model never sees
another annotator's answer for a test dialogue. Hyper-parameters are chosen by the mean held-out
log-likelihood of the target question, as in the paper. Metrics follow the paper (RMSE, Pearson,
Spearman, Kendall on the expected answer) plus the smoothed ECE, Brier score, ROC-AUC and
log-likelihood of P(satisfied) = P(answer >= 3), the quantity the monitor exports.

Besides the baselines, SPUR's Appendix D heads (:mod:`distill.calibration.appendix_d`) run on the
same folds and rows: a linear head that predicts only the rating and a logistic head that predicts
only P(satisfied), so a method may lack an expected answer or a distribution (:class:`Outputs`).

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
from typing import Any, NamedTuple

import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score

from distill.calibration.appendix_d import AppendixDLinear, AppendixDLogistic
from distill.calibration.baselines import BASELINE_NAMES, default_baselines
from distill.calibration.data import CalibrationSet
from distill.calibration.network import LLMRubricCalibrator, satisfied_probability

__all__ = [
    "APPENDIX_D",
    "APPENDIX_D_FEATURES",
    "DEFAULT_GRID",
    "Evaluation",
    "Outputs",
    "cross_val_predict",
    "dialogue_folds",
    "evaluate",
    "grid_search",
    "predict_outputs",
    "satisfied_scores",
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

#: Report names of the SPUR Appendix D heads -> their key under ``"appendix_d"`` in the JSON summary.
APPENDIX_D = {"appendix_d_linear": "linear", "appendix_d_logistic": "logistic"}
APPENDIX_D_FEATURES = ("rubric scores only: the judge's answer distributions for every question, flattened "
                       "(no embedding: the dialogue texts are not in the data); one head for every annotator")

Factory = Callable[[], Any]


class Outputs(NamedTuple):
    """One method's predictions for the scored rows; a field is None when the method lacks it."""

    expected: np.ndarray | None  # expected answer on the 1..K scale
    proba: np.ndarray | None  # (n_rows, K) distribution over the answers
    satisfied: np.ndarray | None  # P(answer >= threshold)


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


def satisfied_scores(satisfied: np.ndarray, outcome: np.ndarray) -> dict[str, float]:
    """Smoothed ECE, Brier score, ROC-AUC, mean log-likelihood and mean of binary predictions.

    ``mean_satisfied`` is the predicted satisfied rate (an expected count over n); compare it with
    the observed rate ``mean(outcome)``.
    """
    f = np.clip(np.asarray(satisfied, dtype=np.float64), 0.0, 1.0)
    o = np.asarray(outcome, dtype=bool)
    return {"smooth_ece": smooth_ece(f, o), "brier": float(np.mean((f - o) ** 2)),
            "roc_auc": float(roc_auc_score(o, f)) if 0 < o.sum() < len(o) else float("nan"),
            "sat_log_likelihood": float(np.mean(np.log(np.clip(np.where(o, f, 1 - f), 1e-12, None)))),
            "mean_satisfied": float(f.mean())}


def score(y: np.ndarray, pred: np.ndarray | None, proba: np.ndarray | None, classes: np.ndarray, *,
          threshold: int = 3, satisfied: np.ndarray | None = None) -> dict[str, float]:
    """Paper metrics on expected answers, log-likelihood of the answer, and the P(satisfied) metrics.

    Each group needs its input: ``pred`` for RMSE and the correlations, ``proba`` for the
    log-likelihood, ``satisfied`` (or ``proba``, summed over answers >= threshold) for the rest.
    """
    y = np.asarray(y, dtype=np.float64)
    out: dict[str, float] = {}
    if pred is not None:
        pred = np.asarray(pred, dtype=np.float64)
        flat = np.ptp(pred) == 0
        out |= {
            "rmse": float(np.sqrt(np.mean((y - pred) ** 2))),
            "pearson": float("nan") if flat else float(stats.pearsonr(y, pred)[0]),
            "spearman": float("nan") if flat else float(stats.spearmanr(y, pred)[0]),
            "kendall": float("nan") if flat else float(stats.kendalltau(y, pred)[0]),
        }
    out["n"] = int(len(y))
    if proba is not None:
        p_true = np.asarray(proba)[np.arange(len(y)), y.astype(int) - 1]
        out["log_likelihood"] = float(np.mean(np.log(np.clip(p_true, 1e-12, None))))
        if satisfied is None:
            satisfied = satisfied_probability(proba, classes, threshold=threshold)
    if satisfied is not None:
        out |= satisfied_scores(satisfied, y >= threshold)
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


def predict_outputs(model: Any, X: np.ndarray, judges: np.ndarray, *, threshold: int = 3) -> Outputs:
    """Whatever a fitted model offers: ``predict``, ``predict_proba``, ``predict_satisfied``."""
    expected = model.predict(X, judges=judges) if hasattr(model, "predict") else None
    proba = model.predict_proba(X, judges=judges) if hasattr(model, "predict_proba") else None
    satisfied: np.ndarray | None
    if proba is not None:
        satisfied = satisfied_probability(proba, model.classes_, threshold=threshold)
    else:
        satisfied = model.predict_satisfied(X, judges=judges) if hasattr(model, "predict_satisfied") else None
    return Outputs(expected, proba, satisfied)


def _fit_predict(factory: Factory, train: CalibrationSet, rows_tr: np.ndarray, test: CalibrationSet,
                 rows_te: np.ndarray) -> tuple[Outputs, Any]:
    model = factory().fit(train.X[rows_tr], train.labels[rows_tr], judges=train.judges[rows_tr])
    return predict_outputs(model, test.X[rows_te], test.judges[rows_te]), model


def cross_val_predict(factory: Factory, data: CalibrationSet, folds: np.ndarray) -> Outputs:
    """Out-of-fold outputs (expected answers, distributions, P(satisfied)) for every row."""
    stitched: dict[str, np.ndarray] = {}
    for k in np.unique(folds):
        outputs, _ = _fit_predict(factory, data, folds != k, data, folds == k)
        for name, value in outputs._asdict().items():
            if value is not None:
                stitched.setdefault(name, np.zeros((len(data), *np.shape(value)[1:])))[folds == k] = value
    return Outputs(**{name: stitched.get(name) for name in Outputs._fields})


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
    """Scores of LLM-Rubric, SPUR Appendix D and the baselines, plus the predictions the report plots."""

    target: str
    protocol: str
    hyperparameters: dict[str, Any]
    scores: dict[str, dict[str, float]]
    y: np.ndarray
    predictions: dict[str, Outputs] = field(repr=False)
    classes: np.ndarray = field(repr=False)
    dialogue_level: dict[str, dict[str, float]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The CLI's JSON: the headline metrics of LLM-Rubric, SPUR Appendix D, then every baseline."""
        main = self.scores["llm_rubric"]
        return {"target": self.target, **{k: main[k] for k in ("rmse", "pearson", "spearman", "kendall")},
                "smooth_ece": main.get("smooth_ece"), "log_likelihood": main.get("log_likelihood"),
                "brier": main.get("brier"), "roc_auc": main.get("roc_auc"),
                "n": main["n"], "protocol": self.protocol, "hyperparameters": self.hyperparameters,
                "appendix_d": {"features": APPENDIX_D_FEATURES,
                               **{key: self.scores[name] for name, key in APPENDIX_D.items() if name in self.scores}},
                "baselines": {k: v for k, v in self.scores.items() if k != "llm_rubric" and k not in APPENDIX_D},
                "dialogue_level": self.dialogue_level}


def _dialogue_means(groups: np.ndarray, values: np.ndarray) -> np.ndarray:
    _, inverse = np.unique(groups.astype(str), return_inverse=True)
    return np.bincount(inverse, weights=values) / np.bincount(inverse)


def evaluate(train: CalibrationSet, test: CalibrationSet | None = None, *,
             params: Mapping[str, Any] | None = None, grid: Mapping[str, Sequence[Any]] | None = None,
             n_splits: int = 5, random_state: int = 43,
             progress: Callable[[str, int, int], None] | None = None) -> Evaluation:
    """Score LLM-Rubric, SPUR Appendix D and the baselines by grouped CV on ``train``, or train on it
    and test on ``test``. Every method sees the same folds and scores the same rows. ``progress`` is
    told (step, done, total) as each method (and the grid search) starts: a run takes minutes.

    With ``grid``, hyper-parameters are picked by grouped CV log-likelihood on ``train`` (with no test
    set this reuses the evaluation folds, the paper's protocol, which flatters every grid point alike).
    """
    if test is not None and (test.questions != train.questions or test.target != train.target):
        raise ValueError(f"train and test sets ask different questions: {train.questions} vs {test.questions}")
    base = {"target_index": train.target_index, "n_options": train.n_options.tolist(),
            "random_state": random_state, **(params or {})}
    folds = dialogue_folds(train.groups, n_splits=n_splits, random_state=random_state)
    report = progress or (lambda step, done, total: None)
    if grid:
        report("grid search", 0, 1)
        base = grid_search(train, grid, folds, base=base)[0][0]

    def make(name: str) -> Any:
        return default_baselines(target_index=train.target_index, n_options=train.n_options,
                                 calibrator_params=base, random_state=random_state)[name]

    head = {"target_index": train.target_index, "n_options": train.n_options.tolist(), "random_state": random_state}
    factories: dict[str, Factory] = {"llm_rubric": lambda: LLMRubricCalibrator(**base),
                                     "appendix_d_linear": lambda: AppendixDLinear(**head),
                                     "appendix_d_logistic": lambda: AppendixDLogistic(**head)}
    factories |= {name: functools.partial(make, name) for name in BASELINE_NAMES}
    ref = test if test is not None else train
    y = ref.labels[:, ref.target_index]
    predictions: dict[str, Outputs] = {}
    for done, (name, factory) in enumerate(factories.items()):
        report(name, done, len(factories))
        if test is None:
            predictions[name] = cross_val_predict(factory, train, folds)
        else:
            everything = np.ones(len(train), bool)
            predictions[name] = _fit_predict(factory, train, everything, test, np.ones(len(test), bool))[0]
    report("scoring", len(factories), len(factories))
    classes = np.arange(1, int(ref.n_options[ref.target_index]) + 1)
    scores = {n: score(y, o.expected, o.proba, classes, satisfied=o.satisfied) for n, o in predictions.items()}
    groups = ref.groups
    dialogue_level = {n: score(_dialogue_means(groups, y), _dialogue_means(groups, o.expected), None, classes)
                      for n, o in predictions.items() if n != "random" and o.expected is not None}
    protocol = (f"{n_splits}-fold CV grouped by dialogue" if test is None else "train on train set, test on test set")
    hp = {k: v for k, v in base.items() if k not in ("n_options", "target_index")}
    return Evaluation(train.target, protocol, hp, scores, y, predictions, classes, dialogue_level)
