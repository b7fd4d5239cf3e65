"""Per-item distilled classifiers and the array-only artifact workers load.

:class:`ItemClassifier` is one rubric item: a ``Pipeline`` around a class-balanced
``LogisticRegression`` whose C is chosen by grouped, stratified cross-validation (group =
conversation id, so a conversation labelled by two judges never sits on both sides of a fold).
Its probabilities are Platt-calibrated on the *cross-fitted* decision values (the same scheme as
``CalibratedClassifierCV(ensemble=False)``; class weighting skews raw probabilities, Platt undoes
it), and the verdict threshold maximises F1 on those held-out probabilities.

:class:`RubricModel` stacks the fitted items into one coefficient matrix so scoring a batch is one
sparse-dense product, and round-trips through plain arrays + a JSON manifest (never pickle).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import precision_recall_curve, roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedGroupKFold, cross_val_predict
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from monitor.contracts.errors import ConfigError, ModelError

FORMAT_VERSION = 1


def sigmoid(z: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(z, -500, 500)))
    return out


def best_f1_threshold(y: np.ndarray, p: np.ndarray) -> float:
    """The probability threshold with the highest F1 on (y, p); 0.5 if y has no positives."""
    if y.sum() == 0:
        return 0.5
    precision, recall, thresholds = precision_recall_curve(y, p)
    f1 = 2 * precision[:-1] * recall[:-1] / np.maximum(precision[:-1] + recall[:-1], 1e-12)
    return float(thresholds[int(np.argmax(f1))])


class ItemClassifier(ClassifierMixin, BaseEstimator):
    """P(item = yes) for one rubric item from conversation features.

    Learned: ``pipeline_`` (refit on all data at ``C_``), ``coef_``, ``intercept_``,
    ``platt_`` = (a, b) with p = sigmoid(a * decision + b), ``threshold_``, ``cv_auc_`` (ROC-AUC of
    the cross-fitted decisions at ``C_``; a grid search runs only when ``Cs`` has several values),
    ``oof_proba_`` (calibrated cross-fitted probabilities of the training rows).
    """

    def __init__(
        self, *, Cs: Sequence[float] = (0.1, 1.0, 10.0), n_splits: int = 3, max_iter: int = 2000,
        random_state: int = 0, n_jobs: int | None = None,
    ) -> None:
        self.Cs = Cs
        self.n_splits = n_splits
        self.max_iter = max_iter
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X: Any, y: Any, groups: Any = None) -> ItemClassifier:
        y = np.asarray(y).astype(int).ravel()
        if set(np.unique(y)) - {0, 1}:
            raise ConfigError(f"ItemClassifier needs binary 0/1 labels. Got values {sorted(set(np.unique(y)))}.")
        n_pos, n_neg = int(y.sum()), int(len(y) - y.sum())
        if min(n_pos, n_neg) < self.n_splits:
            raise ConfigError(
                f"ItemClassifier needs at least n_splits={self.n_splits} examples of each class. "
                f"Got {n_pos} positives and {n_neg} negatives."
            )
        if not self.Cs or any(c <= 0 for c in self.Cs):
            raise ConfigError(f"The 'Cs' parameter of ItemClassifier must be positive floats. Got {self.Cs!r} instead.")
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        cv = StratifiedGroupKFold(n_splits=self.n_splits, shuffle=True, random_state=self.random_state)
        base = Pipeline(
            [("lr", LogisticRegression(class_weight="balanced", max_iter=self.max_iter, solver="liblinear"))]
        )
        if len(self.Cs) > 1:
            search = GridSearchCV(base, {"lr__C": list(self.Cs)}, scoring="roc_auc", cv=cv, n_jobs=self.n_jobs)
            search.fit(X, y, groups=groups)
            self.C_ = float(search.best_params_["lr__C"])
            self.pipeline_ = search.best_estimator_
        else:
            self.C_ = float(self.Cs[0])
            self.pipeline_ = clone(base).set_params(lr__C=self.C_).fit(X, y)
        decision = cross_val_predict(
            clone(self.pipeline_), X, y, groups=groups, cv=cv, method="decision_function", n_jobs=self.n_jobs
        )
        self.cv_auc_ = float(roc_auc_score(y, decision))
        platt = LogisticRegression(C=1e6, max_iter=1000).fit(decision.reshape(-1, 1), y)
        self.platt_ = (float(platt.coef_[0, 0]), float(platt.intercept_[0]))
        self.oof_proba_ = sigmoid(self.platt_[0] * decision + self.platt_[1])
        self.threshold_ = best_f1_threshold(y, self.oof_proba_)
        lr = self.pipeline_.named_steps["lr"]
        self.coef_ = lr.coef_.ravel().astype(np.float64)
        self.intercept_ = float(lr.intercept_[0])
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = X.shape[1]
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "pipeline_")
        return np.asarray(self.pipeline_.decision_function(X), dtype=float)

    def predict_proba(self, X: Any) -> np.ndarray:
        p = sigmoid(self.platt_[0] * self.decision_function(X) + self.platt_[1])
        return np.column_stack([1 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        return (self.predict_proba(X)[:, 1] >= self.threshold_).astype(int)


@dataclass
class RubricModel:
    """All trained items of one rubric set as stacked arrays: what the registry stores and workers run.

    ``decision = X @ coef.T + intercept``; ``P = sigmoid(platt_a * decision + platt_b)``. Items
    that could not be trained are listed in ``untrained`` with the reason and are not scored.
    """

    rubric_key: str
    featurizer: dict[str, Any]
    item_ids: list[str]
    coef: np.ndarray  # (n_items, n_features)
    intercept: np.ndarray  # (n_items,)
    platt_a: np.ndarray
    platt_b: np.ndarray
    thresholds: np.ndarray
    untrained: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # training range, C, metrics, label counts
    # item id -> out-of-fold probabilities on the hash slice of the training data: the drift reference
    reference: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_items(
        cls, items: dict[str, ItemClassifier], *, rubric_key: str, featurizer: dict[str, Any],
        untrained: dict[str, str] | None = None, info: dict[str, Any] | None = None,
        columns: np.ndarray | None = None, n_features: int | None = None,
        reference: dict[str, np.ndarray] | None = None,
    ) -> RubricModel:
        """Stack fitted items; ``columns`` maps their inputs back into ``n_features`` featurizer columns.

        Training on the columns that are non-zero in the training data only is exact for an
        L2-penalised model (a column that is always zero gets weight zero) and much faster for
        wide hashed features, whose optimiser cost grows with the width.
        """
        ids = list(items)
        if not ids:
            raise ModelError("no item could be trained; nothing to publish")
        fitted = [items[i] for i in ids]
        coef = np.vstack([m.coef_ for m in fitted]).astype(np.float32)
        if columns is not None:
            full = np.zeros((len(ids), int(n_features if n_features is not None else columns.max() + 1)), np.float32)
            full[:, columns] = coef
            coef = full
        return cls(
            rubric_key=rubric_key, featurizer=featurizer, item_ids=ids,
            coef=coef,
            intercept=np.array([m.intercept_ for m in fitted]),
            platt_a=np.array([m.platt_[0] for m in fitted]), platt_b=np.array([m.platt_[1] for m in fitted]),
            thresholds=np.array([m.threshold_ for m in fitted]),
            untrained=dict(untrained or {}),
            info={"C": {i: m.C_ for i, m in items.items()}, "cv_auc": {i: m.cv_auc_ for i, m in items.items()},
                  **(info or {})},
            reference=dict(reference or {}),
        )

    def __post_init__(self) -> None:
        # column-major, so ``coef.T`` is C-contiguous: scipy's sparse @ dense would otherwise copy the whole
        # (n_features, n_items) matrix on every call (7.5 ms for 20 items x 98,304 columns); one copy, here
        if self.coef.ndim == 2:
            self.coef = np.asfortranarray(self.coef)

    @property
    def n_features(self) -> int:
        return int(self.coef.shape[1])

    def predict_proba(self, X: Any) -> np.ndarray:
        """(n_samples, n_items) calibrated P(yes), from one matrix product for all items."""
        if X.shape[1] != self.n_features:
            raise ModelError(f"features have {X.shape[1]} columns; the model expects {self.n_features}")
        decision = X @ self.coef.T
        decision = np.asarray(decision.toarray() if sp.issparse(decision) else decision, dtype=np.float64)
        return sigmoid(self.platt_a * (decision + self.intercept) + self.platt_b)

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {"coef": self.coef, "intercept": self.intercept, "platt_a": self.platt_a, "platt_b": self.platt_b,
                  "thresholds": self.thresholds}
        if self.reference:  # one row per item in item order, NaN-padded to the longest
            width = max(len(v) for v in self.reference.values())
            table = np.full((len(self.item_ids), width), np.nan, dtype=np.float32)
            for k, item_id in enumerate(self.item_ids):
                values = self.reference.get(item_id, np.zeros(0))
                table[k, :len(values)] = values
            arrays["reference"] = table
        return arrays

    def manifest(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, "rubric_key": self.rubric_key, "featurizer": self.featurizer,
                "item_ids": self.item_ids, "untrained": self.untrained, **self.info}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], manifest: dict[str, Any]) -> RubricModel:
        """Rebuild from registry arrays + manifest; ModelError if anything is missing or inconsistent."""
        try:
            if manifest.get("format") != FORMAT_VERSION:
                raise ModelError(f"unsupported model format {manifest.get('format')!r} (expected {FORMAT_VERSION})")
            reserved = {"format", "rubric_key", "featurizer", "item_ids", "untrained"}
            model = cls(
                rubric_key=manifest["rubric_key"], featurizer=manifest["featurizer"],
                item_ids=list(manifest["item_ids"]), coef=arrays["coef"], intercept=arrays["intercept"],
                platt_a=arrays["platt_a"], platt_b=arrays["platt_b"], thresholds=arrays["thresholds"],
                untrained=dict(manifest.get("untrained", {})),
                info={k: v for k, v in manifest.items() if k not in reserved},
            )
        except KeyError as exc:
            raise ModelError(f"model artifact lacks {exc.args[0]!r}") from exc
        k = len(model.item_ids)
        shapes = [model.coef.shape[0], *(a.shape[0] for a in (model.intercept, model.platt_a, model.platt_b,
                                                              model.thresholds))]
        if model.coef.ndim != 2 or any(s != k for s in shapes):
            raise ModelError(f"model arrays disagree with {k} item ids: shapes {shapes}")
        table = arrays.get("reference")
        if table is not None:
            if table.ndim != 2 or table.shape[0] != k:
                raise ModelError(f"model reference has shape {table.shape}, expected ({k}, n)")
            model.reference = {item_id: row[~np.isnan(row)].astype(np.float64)
                               for item_id, row in zip(model.item_ids, table, strict=True) if (~np.isnan(row)).any()}
        return model
