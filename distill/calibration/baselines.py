"""Baselines the calibration network must beat (LLM-Rubric paper, Table 1).

All share the calibrator's interface (``fit(X, y, judges=...)``, ``predict``, ``predict_proba`` over
the target question's classes), so cross-validation treats them exactly like the network.

- :class:`RandomBaseline`: a uniformly random answer (the floor).
- :class:`JudgeArgmaxBaseline`: the judge's most probable answer, as an argmax dashboard would count.
- :class:`JudgeExpectedBaseline`: the expected answer under the judge's (renormalised) distribution.
- :class:`TargetOnlyCalibrator`: the LLM-Rubric network fed and trained on the target question only,
  which isolates what the other rubric questions add.
- :class:`ConstantMeanBaseline`: the training mean (and training label frequencies as distribution).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distill.calibration.network import LLMRubricCalibrator

__all__ = [
    "BASELINE_NAMES",
    "ConstantMeanBaseline",
    "JudgeArgmaxBaseline",
    "JudgeExpectedBaseline",
    "RandomBaseline",
    "TargetOnlyCalibrator",
    "check_target",
    "default_baselines",
]


def check_target(X: np.ndarray, y: np.ndarray, target_index: int, n_options: Sequence[int] | None
                 ) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Validated ``X`` (float) and ``y``, the target question's index and its classes 1..K.

    >>> X, y, target, classes = check_target(np.zeros((2, 3, 4)), np.ones((2, 3), int), -1, [4, 4, 2])
    >>> target, classes.tolist()
    (2, [1, 2])
    """
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
    if X.ndim != 3 or y.shape != X.shape[:2]:
        raise ValueError(f"X must be (n_samples, n_questions, max_options) and y (n_samples, "
                         f"n_questions); got X {X.shape} and y {y.shape}.")
    target = int(range(X.shape[1])[target_index])
    k = X.shape[2] if n_options is None else int(n_options[target])
    return X, y, target, np.arange(1, k + 1)


class _TargetBaseline:
    """Common bookkeeping: which question is the target and how many options it has."""

    def __init__(self, *, target_index: int = -1, n_options: Sequence[int] | None = None,
                 random_state: int = 0) -> None:
        self.target_index = target_index
        self.n_options = n_options
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray, *, judges: Any = None) -> _TargetBaseline:
        X, y, self.target_, self.classes_ = check_target(X, y, self.target_index, self.n_options)
        self._fit(X, y[:, self.target_])
        return self

    def _fit(self, X: np.ndarray, y_t: np.ndarray) -> None:
        """Learn from the target labels; nothing to learn by default."""

    def _judge(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=np.float64)[:, self.target_, : len(self.classes_)]

    def predict_proba(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        raise NotImplementedError  # each baseline says what its answer distribution is

    def predict(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        expected: np.ndarray = self.predict_proba(X, judges=judges) @ self.classes_.astype(np.float64)
        return expected


class RandomBaseline(_TargetBaseline):
    """A uniformly random answer; its distribution is uniform."""

    def predict_proba(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        return np.full((len(X), len(self.classes_)), 1.0 / len(self.classes_))

    def predict(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        rng = np.random.default_rng(self.random_state)
        return np.asarray(rng.choice(self.classes_, size=len(X)), dtype=np.float64)


class JudgeArgmaxBaseline(_TargetBaseline):
    """The judge's most probable answer, as a one-hot distribution."""

    def predict_proba(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        p = self._judge(X)
        one_hot: np.ndarray = np.eye(len(self.classes_))[p.argmax(axis=1)]
        return one_hot


class JudgeExpectedBaseline(_TargetBaseline):
    """The judge's own distribution, renormalised over the question's options."""

    def predict_proba(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        p = self._judge(X)
        total = p.sum(axis=1, keepdims=True)
        return np.where(total > 0, p / np.where(total > 0, total, 1.0), 1.0 / len(self.classes_))


class ConstantMeanBaseline(_TargetBaseline):
    """Predicts the training mean; the distribution is the training label frequencies."""

    def _fit(self, X: np.ndarray, y_t: np.ndarray) -> None:
        valid = y_t[y_t > 0]
        self.mean_ = float(valid.mean())
        self.frequencies_ = np.bincount(valid - 1, minlength=len(self.classes_)) / len(valid)

    def predict_proba(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        return np.tile(self.frequencies_, (len(X), 1))

    def predict(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        return np.full(len(X), self.mean_)


class TargetOnlyCalibrator:
    """The LLM-Rubric network with only the target question as input and output."""

    def __init__(self, *, target_index: int = -1, n_options: Sequence[int] | None = None,
                 **calibrator_params: Any) -> None:
        self.target_index = target_index
        self.n_options = n_options
        self.calibrator_params = calibrator_params

    def _slice(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X)[:, [self.target_]]

    def fit(self, X: np.ndarray, y: np.ndarray, *, judges: Any = None) -> TargetOnlyCalibrator:
        self.target_ = int(range(np.asarray(X).shape[1])[self.target_index])
        k = None if self.n_options is None else [int(self.n_options[self.target_])]
        self.calibrator_ = LLMRubricCalibrator(**self.calibrator_params, target_index=0, n_options=k)
        self.calibrator_.fit(self._slice(X), np.asarray(y)[:, [self.target_]], judges=judges)
        self.classes_ = self.calibrator_.classes_
        return self

    def predict_proba(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        return self.calibrator_.predict_proba(self._slice(X), judges=judges)

    def predict(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        return self.calibrator_.predict(self._slice(X), judges=judges)


def default_baselines(*, target_index: int, n_options: Sequence[int] | np.ndarray, calibrator_params: dict[str, Any],
                      random_state: int = 0) -> dict[str, Any]:
    """Unfitted baselines by report name, in the paper's order (fresh objects on every call)."""
    common: dict[str, Any] = {"target_index": target_index, "n_options": [int(k) for k in n_options]}
    shared = {k: v for k, v in calibrator_params.items() if k not in ("target_index", "n_options")}
    return {
        "random": RandomBaseline(**common, random_state=random_state),
        "judge_argmax": JudgeArgmaxBaseline(**common),
        "judge_expected": JudgeExpectedBaseline(**common),
        "calibrated_target_only": TargetOnlyCalibrator(**common, **shared),
        "llm_rubric_shared_only": LLMRubricCalibrator(**common, **{**shared, "personalized": False}),
        "constant_mean": ConstantMeanBaseline(**common),
    }


#: Report names of :func:`default_baselines`, in order.
BASELINE_NAMES = ("random", "judge_argmax", "judge_expected", "calibrated_target_only",
                  "llm_rubric_shared_only", "constant_mean")
