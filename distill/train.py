"""Train every rubric item from teacher labels: data assembly, held-out split, per-item fits.

Labels come from the label store (or a JSONL export of :class:`~distill.label_record.LabelRecord`).
A label matrix holds 1/0 per (conversation, item) and NaN where the judge gave no verdict (jury
disagreement); each item trains on its own non-missing rows. Items with fewer than
``min_positives`` positive (or negative) training labels are reported, not trained.

Labels from the router's boosts (uncertainty, feedback; ``hash_slice`` False) train like any
other, unweighted: uncertainty sampling exists to put them in the fit. Everything that must
describe the traffic itself comes from the hash slice only: the held-out rows of the promotion
gate (:func:`split_holdout`), and the drift reference and mean uncertainty stored with the model,
from each item's cross-validated (out-of-fold) predictions on the hash-slice rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import ValidationError
from sklearn.base import BaseEstimator
from sklearn.model_selection import GroupShuffleSplit

from distill.featurizers.spec import featurizer_config, featurizer_name, make_featurizer
from distill.label_record import LabelRecord
from distill.model import ItemClassifier, RubricModel
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.uncertainty import mean_uncertainty

Progress = Callable[[str, str], None]  # (item_id, status) after each item


@dataclass
class TrainingSet:
    """Conversations with an (n, n_items) label matrix (1/0/NaN); ``groups`` keep a conversation together."""

    conversations: list[Conversation]
    labels: np.ndarray
    item_ids: list[str]
    groups: np.ndarray
    labelled_at: np.ndarray = field(default_factory=lambda: np.zeros(0))
    hash_slice: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # empty: every row is

    def __len__(self) -> int:
        return len(self.conversations)

    def hash_mask(self) -> np.ndarray:
        """True for rows from the router's uniform hash slice (all rows when not recorded)."""
        return self.hash_slice.astype(bool) if len(self.hash_slice) else np.ones(len(self), dtype=bool)

    def subset(self, index: Sequence[int] | np.ndarray) -> TrainingSet:
        index = np.asarray(index, dtype=int)
        stamps = self.labelled_at[index] if len(self.labelled_at) else self.labelled_at
        hashed = self.hash_slice[index] if len(self.hash_slice) else self.hash_slice
        return TrainingSet([self.conversations[i] for i in index], self.labels[index], self.item_ids,
                           self.groups[index], stamps, hashed)

    def time_range(self) -> tuple[float, float] | None:
        return (float(self.labelled_at.min()), float(self.labelled_at.max())) if len(self.labelled_at) else None


def dataset_from_records(records: Sequence[LabelRecord], rubric: RubricSet) -> TrainingSet:
    """Labels of ``rubric`` (same set and version) as a training set; other rubric versions are skipped."""
    kept = [r for r in records if r.rubric_key == rubric.key]
    labels = np.full((len(kept), len(rubric.items)), np.nan)
    column = {item_id: j for j, item_id in enumerate(rubric.item_ids)}
    for i, record in enumerate(kept):
        for item_id, verdict in record.verdicts().items():
            if item_id in column and verdict is not None:
                labels[i, column[item_id]] = float(verdict)
    return TrainingSet(
        conversations=[r.conversation() for r in kept], labels=labels, item_ids=rubric.item_ids,
        groups=np.array([r.conversation_id for r in kept], dtype=object),
        labelled_at=np.array([r.labelled_at for r in kept], dtype=float),
        hash_slice=np.array([r.in_hash_slice for r in kept], dtype=bool),
    )


def read_jsonl(path: Path | str) -> list[LabelRecord]:
    """LabelRecord JSON lines (the store's export format); errors name the line."""
    records = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read labels file {path}: {exc}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(LabelRecord.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            raise ConfigError(f"{path}:{number}: not a label record: {exc}") from exc
    return records


def split_holdout(data: TrainingSet, *, test_size: float = 0.25, seed: int = 0) -> tuple[TrainingSet, TrainingSet]:
    """Grouped train/held-out split, no conversation id on both sides; held-out rows from the hash slice only.

    ``test_size`` is the share of the hash-slice conversations held out. Boosted labels all train: a
    holdout enriched in uncertain conversations would rate every model on the hardest cases, not on
    the traffic, and compare two models on a mix that depends on which one did the sampling.
    """
    if not 0 < test_size < 1:
        raise ConfigError(f"test_size must be in (0, 1). Got {test_size!r} instead.")
    hashed = np.flatnonzero(data.hash_mask())
    if len(set(data.groups[hashed])) < 2:
        raise ConfigError(f"cannot split {len(data)} labelled conversations into train and held-out sets: "
                          f"{len(set(data.groups[hashed]))} from the hash slice (the held-out set comes from it)")
    splitter = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=seed)
    _, test_local = next(splitter.split(np.zeros(len(hashed)), groups=data.groups[hashed]))
    held = set(data.groups[hashed[test_local]])
    in_test = np.array([g in held for g in data.groups], dtype=bool)
    return data.subset(np.flatnonzero(~in_test)), data.subset(np.flatnonzero(in_test))


REFERENCE_MAX = 5000  # CV predictions kept per item as its drift reference


def reference_statistics(data: TrainingSet, fitted: dict[str, ItemClassifier],
                         rows_by_item: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Each item's out-of-fold probabilities on the hash-slice rows (its drift reference), and the mean
    uncertainty of a hash-slice conversation under them (the router's normaliser), per measure."""
    hashed = data.hash_mask()
    reference: dict[str, np.ndarray] = {}
    matrix = np.full((len(data), len(fitted)), np.nan)
    for k, (item_id, clf) in enumerate(fitted.items()):
        rows = rows_by_item[item_id]
        keep = hashed[rows]
        matrix[rows, k] = clf.oof_proba_
        values = np.asarray(clf.oof_proba_, dtype=float)[keep]
        if len(values) > REFERENCE_MAX:
            values = values[np.random.default_rng(0).choice(len(values), REFERENCE_MAX, replace=False)]
        reference[item_id] = values
    means = {m: mean_uncertainty(matrix[hashed], m) for m in ("margin", "entropy")}
    info = {"source": "out-of-fold (cross-validated) predictions on the hash-slice training rows",
            "n": {i: int(len(v)) for i, v in reference.items()}, "hash_rows": int(hashed.sum()),
            "mean_uncertainty": means}
    return reference, info


@dataclass
class TrainedModel:
    """What training produced: the artifact, the fitted featurizer and each item's status."""

    model: RubricModel
    featurizer: BaseEstimator
    status: dict[str, str]  # item id -> "trained" or the reason it was not


def train_items(
    data: TrainingSet, featurizer: str | BaseEstimator, *, rubric: RubricSet, min_positives: int = 10,
    Cs: Sequence[float] = (0.1, 1.0, 10.0), n_splits: int = 3, random_state: int = 0,
    progress: Progress | None = None, info: dict[str, Any] | None = None, features: Any = None,
) -> TrainedModel:
    """Featurize once, then fit one :class:`ItemClassifier` per item with enough labels of both classes.

    ``features``: the rows of ``featurizer.transform(data.conversations)`` computed beforehand (a
    benchmark training on nested subsets of one pool encodes the pool once)."""
    featurizer = make_featurizer(featurizer) if isinstance(featurizer, str) else featurizer
    if features is None:
        X_all = featurizer.fit_transform(data.conversations)
    else:
        if features.shape[0] != len(data):
            raise ConfigError(f"features have {features.shape[0]} rows for {len(data)} conversations")
        featurizer.fit(data.conversations)
        X_all = features
    columns = np.flatnonzero(X_all.getnnz(axis=0)) if sp.issparse(X_all) else np.arange(X_all.shape[1])
    X = X_all[:, columns]  # always-zero hashed columns carry no weight: drop them (see RubricModel.from_items)
    fitted: dict[str, ItemClassifier] = {}
    rows_by_item: dict[str, np.ndarray] = {}
    status: dict[str, str] = {}
    for j, item_id in enumerate(data.item_ids):
        rows = np.flatnonzero(~np.isnan(data.labels[:, j]))
        y = data.labels[rows, j].astype(int)
        n_pos, n_neg = int(y.sum()), int(len(y) - y.sum())
        if n_pos < min_positives:
            status[item_id] = f"insufficient positives: {n_pos} < {min_positives}"
        elif n_neg < min_positives:
            status[item_id] = f"insufficient negatives: {n_neg} < {min_positives}"
        else:
            clf = ItemClassifier(Cs=Cs, n_splits=n_splits, random_state=random_state)
            fitted[item_id] = clf.fit(X[rows], y, groups=data.groups[rows])
            rows_by_item[item_id] = rows
            status[item_id] = "trained"
        if progress is not None:
            progress(item_id, status[item_id])
    time_range = data.time_range()
    reference, reference_info = reference_statistics(data, fitted, rows_by_item) if fitted else ({}, {})
    model = RubricModel.from_items(
        fitted, rubric_key=rubric.key, featurizer=featurizer_config(featurizer),
        untrained={i: s for i, s in status.items() if s != "trained"}, columns=columns, n_features=X_all.shape[1],
        info={"n_train": len(data), "training_range": list(time_range) if time_range else None,
              "positives": {i: int(np.nansum(data.labels[:, j])) for j, i in enumerate(data.item_ids)},
              "featurizer_name": featurizer_name(featurizer), "reference": reference_info, **(info or {})},
        reference=reference,
    )
    return TrainedModel(model=model, featurizer=featurizer, status=status)
