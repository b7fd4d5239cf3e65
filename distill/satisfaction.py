"""Overall satisfaction from conversation features and rubric probabilities (SPUR Appendix D).

Beside the per-item classifiers of :mod:`distill.model`: the same array-only artifact format, one
head over their (cross-fitted) probabilities; :mod:`distill.calibration.appendix_d` wraps it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedGroupKFold
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from distill.model import FORMAT_VERSION, sigmoid
from monitor.contracts.errors import ConfigError, ModelError


def satisfaction_features(X: Any, rubric_proba: np.ndarray, *, rubric_weight: float = 1.0) -> Any:
    """SPUR Appendix D input: conversation features next to the per-item rubric probabilities."""
    extra = np.asarray(rubric_proba, dtype=np.float64) * rubric_weight
    return sp.hstack([X, sp.csr_matrix(extra)], format="csr") if sp.issparse(X) else np.hstack([X, extra])


class SatisfactionModel(BaseEstimator):
    """Overall satisfaction from embedding + rubric scores (SPUR Appendix D), with two heads.

    ``head="logistic"``: P(satisfied) from a binary label (SAT vs DSAT, thumbs up vs down), class-
    balanced, C chosen by grouped CV on ROC-AUC. ``head="linear"``: a ridge regression of a rating
    (CSAT, a 1-5 dialogue rating), alpha chosen by grouped CV on R^2. Inputs come from
    :func:`satisfaction_features`; the rubric probabilities should be cross-fitted
    (``ItemClassifier.oof_proba_``) so the head does not learn to trust in-sample scores.
    Learned: ``pipeline_``, ``coef_``, ``intercept_``, ``param_`` (the chosen C or alpha).
    """

    def __init__(self, *, head: str = "logistic", grid: Sequence[float] = (0.1, 1.0, 10.0), n_splits: int = 3,
                 random_state: int = 0) -> None:
        self.head = head
        self.grid = grid
        self.n_splits = n_splits
        self.random_state = random_state

    def fit(self, X: Any, y: Any, groups: Any = None) -> SatisfactionModel:
        from sklearn.linear_model import Ridge
        from sklearn.model_selection import GroupKFold

        y = np.asarray(y, dtype=float).ravel()
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        if self.head == "logistic":
            step, name, scoring = LogisticRegression(class_weight="balanced", solver="liblinear"), "lr__C", "roc_auc"
            cv: Any = StratifiedGroupKFold(n_splits=self.n_splits, shuffle=True, random_state=self.random_state)
            y = y.astype(int)
        elif self.head == "linear":
            step, name, scoring = Ridge(), "lr__alpha", "r2"
            cv = GroupKFold(n_splits=self.n_splits)
        else:
            raise ConfigError(f"The 'head' parameter of SatisfactionModel must be 'logistic' or 'linear'. "
                              f"Got {self.head!r} instead.")
        search = GridSearchCV(Pipeline([("lr", step)]), {name: list(self.grid)}, scoring=scoring, cv=cv)
        search.fit(X, y, groups=groups)
        self.pipeline_ = search.best_estimator_
        self.param_ = float(search.best_params_[name])
        est = self.pipeline_.named_steps["lr"]
        self.coef_ = np.asarray(est.coef_, dtype=np.float64).ravel()
        self.intercept_ = float(np.ravel(est.intercept_)[0])
        if self.head == "logistic":
            self.classes_ = np.array([0, 1])
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "coef_")
        return np.asarray(X @ self.coef_).ravel() + self.intercept_

    def predict_proba(self, X: Any) -> np.ndarray:
        if self.head != "logistic":
            raise ConfigError("predict_proba needs head='logistic'; the linear head predicts a rating")
        p = sigmoid(self.decision_function(X))
        return np.column_stack([1 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        d = self.decision_function(X)
        return (d >= 0).astype(int) if self.head == "logistic" else d

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return ({"coef": self.coef_, "intercept": np.array([self.intercept_])},
                {"format": FORMAT_VERSION, "head": self.head, "param": self.param_})

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], manifest: dict[str, Any]) -> SatisfactionModel:
        try:
            model = cls(head=manifest["head"])
            model.coef_, model.intercept_ = arrays["coef"].ravel(), float(arrays["intercept"][0])
            model.param_ = float(manifest["param"])
        except KeyError as exc:
            raise ModelError(f"satisfaction artifact lacks {exc.args[0]!r}") from exc
        if model.head == "logistic":
            model.classes_ = np.array([0, 1])
        return model
