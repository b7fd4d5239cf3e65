"""Train every rubric item from teacher labels: data assembly, held-out split, per-item fits.

Labels come from the label store (or a JSONL export of :class:`~distill.store.LabelRecord`).
A label matrix holds 1/0 per (conversation, item) and NaN where the judge gave no verdict (jury
disagreement); each item trains on its own non-missing rows. Items with fewer than
``min_positives`` positive (or negative) training labels are reported, not trained.
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
from distill.model import ItemClassifier, RubricModel
from distill.store import LabelRecord
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import RubricSet

Progress = Callable[[str, str], None]  # (item_id, status) after each item


@dataclass
class TrainingSet:
    """Conversations with an (n, n_items) label matrix (1/0/NaN); ``groups`` keep a conversation together."""

    conversations: list[Conversation]
    labels: np.ndarray
    item_ids: list[str]
    groups: np.ndarray
    labelled_at: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __len__(self) -> int:
        return len(self.conversations)

    def subset(self, index: Sequence[int] | np.ndarray) -> TrainingSet:
        index = np.asarray(index, dtype=int)
        stamps = self.labelled_at[index] if len(self.labelled_at) else self.labelled_at
        return TrainingSet([self.conversations[i] for i in index], self.labels[index], self.item_ids,
                           self.groups[index], stamps)

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
    """Grouped train/held-out split: no conversation id on both sides."""
    if not 0 < test_size < 1:
        raise ConfigError(f"test_size must be in (0, 1). Got {test_size!r} instead.")
    if len(set(data.groups)) < 2:
        raise ConfigError(f"cannot split {len(data)} labelled conversations into train and held-out sets")
    splitter = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=seed)
    train, test = next(splitter.split(np.zeros(len(data)), groups=data.groups))
    return data.subset(train), data.subset(test)


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
            status[item_id] = "trained"
        if progress is not None:
            progress(item_id, status[item_id])
    time_range = data.time_range()
    model = RubricModel.from_items(
        fitted, rubric_key=rubric.key, featurizer=featurizer_config(featurizer),
        untrained={i: s for i, s in status.items() if s != "trained"}, columns=columns, n_features=X_all.shape[1],
        info={"n_train": len(data), "training_range": list(time_range) if time_range else None,
              "positives": {i: int(np.nansum(data.labels[:, j])) for j, i in enumerate(data.item_ids)},
              "featurizer_name": featurizer_name(featurizer), **(info or {})},
    )
    return TrainedModel(model=model, featurizer=featurizer, status=status)
