"""SPUR Appendix D heads on rubric scores, in the calibration contract so they share LLM-Rubric's folds.

SPUR (Lin et al., 2024, Appendix D) predicts overall satisfaction from a conversation embedding
plus the rubric scores, with a logistic head (P(satisfied)) or a linear head (a rating). The
LLM-Rubric data holds the judge's answers but not the dialogue texts, so no embedding can be
computed here: the features are the rubric scores alone, i.e. the judge's answer distributions
for every question, flattened (the same input the LLM-Rubric network reads). Both heads are
:class:`distill.satisfaction.SatisfactionModel` and are shared by every label source (they ignore
``judges``), which makes the comparison with the personalized network a test of personalization.

- :class:`AppendixDLinear`: ``head="linear"`` (ridge) regressing the target answer (1..K);
  ``predict`` gives the rating, there is no distribution.
- :class:`AppendixDLogistic`: ``head="logistic"`` on ``answer >= threshold``;
  ``predict_satisfied`` gives P(satisfied), there is no rating.

The heads pick their regularisation by grouped CV inside the training rows; the groups are the
distinct feature rows, i.e. the dialogues, so no inner fold sees one dialogue on both sides.

References
----------
Lin et al. "Interpretable User Satisfaction Estimation for Conversational Systems with Large
Language Models" (SPUR). ACL 2024, arXiv:2403.12388, Appendix D.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distill.calibration.baselines import check_target
from distill.satisfaction import SatisfactionModel

__all__ = ["AppendixDLinear", "AppendixDLogistic", "rubric_scores"]


def rubric_scores(X: np.ndarray) -> np.ndarray:
    """The judge's answer distributions ``[n, n_questions, max_options]`` as ``[n, n_questions * max_options]``.

    >>> rubric_scores(np.arange(8.0).reshape(1, 2, 4)).tolist()
    [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]]
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 3:
        raise ValueError(f"X must be (n_samples, n_questions, max_options); got shape {X.shape}.")
    return X.reshape(len(X), -1)


class _AppendixDHead:
    """Common bookkeeping: the target question, its classes, and the wrapped SatisfactionModel."""

    head = ""

    def __init__(self, *, target_index: int = -1, n_options: Sequence[int] | None = None, threshold: int = 3,
                 grid: Sequence[float] = (0.1, 1.0, 10.0), n_splits: int = 3, random_state: int = 0) -> None:
        self.target_index = target_index
        self.n_options = n_options
        self.threshold = threshold
        self.grid = grid
        self.n_splits = n_splits
        self.random_state = random_state

    def _target(self, y_t: np.ndarray) -> np.ndarray:
        return y_t

    def fit(self, X: np.ndarray, y: np.ndarray, *, judges: Any = None) -> _AppendixDHead:
        """Fit on the rows whose target is answered; ``judges`` is ignored (one head for every judge)."""
        X, y, self.target_, self.classes_ = check_target(X, y, self.target_index, self.n_options)
        y_t = y[:, self.target_]
        valid = y_t > 0
        features = rubric_scores(X[valid])
        _, dialogues = np.unique(features, axis=0, return_inverse=True)
        self.model_ = SatisfactionModel(head=self.head, grid=self.grid, n_splits=self.n_splits,
                                        random_state=self.random_state)
        self.model_.fit(features, self._target(y_t[valid]), groups=dialogues.ravel())
        return self


class AppendixDLinear(_AppendixDHead):
    """Linear (ridge) head: the target answer as a rating from the rubric scores.

    >>> X = np.zeros((40, 2, 4)); X[:, 0, 0] = np.tile([0.0, 1.0], 20); X[:, 1, 0] = np.arange(40) / 1e3
    >>> y = np.column_stack([np.ones(40, int), np.tile([1, 4], 20)])
    >>> AppendixDLinear().fit(X, y).predict(X[:2]).round(1).tolist()
    [1.0, 4.0]
    """

    head = "linear"

    def predict(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        """The predicted answer (unclipped, on the 1..K scale)."""
        return self.model_.predict(rubric_scores(X))


class AppendixDLogistic(_AppendixDHead):
    """Logistic head: P(answer >= threshold) from the rubric scores."""

    head = "logistic"

    def _target(self, y_t: np.ndarray) -> np.ndarray:
        return (y_t >= self.threshold).astype(int)

    def predict_satisfied(self, X: np.ndarray, *, judges: Any = None) -> np.ndarray:
        """P(satisfied) = P(answer >= threshold), shape ``(n_samples,)``."""
        return self.model_.predict_proba(rubric_scores(X))[:, 1]
