"""Agreement with the teacher on held-out labels, and the promotion gate built on it.

Metrics per item: ROC-AUC and average precision (ranking, threshold-free), F1 at the model's
chosen threshold (what verdict counters see) and the Brier score (calibration + sharpness).
The gate compares a candidate with the live model *on the same held-out rows*: a candidate
goes live only if its macro ROC-AUC is no worse than the live one's beyond ``tolerance``, its
macro Brier no worse beyond ``tolerance``, and it scores every item the live model scores.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from sklearn.metrics import average_precision_score, brier_score_loss, f1_score, roc_auc_score

from distill.model import RubricModel
from distill.train import TrainingSet


@dataclass(frozen=True)
class ItemMetrics:
    n: int
    positives: int
    roc_auc: float | None  # None when the held-out rows have one class only
    average_precision: float | None
    f1: float
    brier: float
    threshold: float


@dataclass
class Evaluation:
    """Per-item metrics of one model on one held-out set, plus the predictions (for plots)."""

    items: dict[str, ItemMetrics]
    predictions: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)  # (y, p)

    def macro(self, metric: str, items: list[str] | None = None) -> float | None:
        values = [getattr(m, metric) for i, m in self.items.items() if items is None or i in items]
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else None

    def to_json(self) -> dict[str, Any]:
        return {i: asdict(m) for i, m in self.items.items()}


def evaluate(model: RubricModel, featurizer: Any, data: TrainingSet, *, features: Any = None) -> Evaluation:
    """Score ``data`` with ``model`` and compare with its teacher labels, item by item.

    ``features``: ``featurizer.transform(data.conversations)`` computed beforehand (featurizers are
    stateless), so a benchmark scoring several models on one held-out set encodes it once."""
    proba = model.predict_proba(featurizer.transform(data.conversations) if features is None else features)
    column = {item_id: j for j, item_id in enumerate(data.item_ids)}
    items: dict[str, ItemMetrics] = {}
    predictions: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for k, item_id in enumerate(model.item_ids):
        if item_id not in column:
            continue
        labels = data.labels[:, column[item_id]]
        rows = np.flatnonzero(~np.isnan(labels))
        if len(rows) == 0:
            continue
        y, p = labels[rows].astype(int), proba[rows, k]
        both = 0 < y.sum() < len(y)
        threshold = float(model.thresholds[k])
        items[item_id] = ItemMetrics(
            n=len(rows), positives=int(y.sum()),
            roc_auc=float(roc_auc_score(y, p)) if both else None,
            average_precision=float(average_precision_score(y, p)) if y.sum() else None,
            f1=float(f1_score(y, (p >= threshold).astype(int), zero_division=0.0)),
            brier=float(brier_score_loss(y, p, pos_label=1)), threshold=threshold,
        )
        predictions[item_id] = (y, p)
    return Evaluation(items=items, predictions=predictions)


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    reasons: list[str]
    candidate: dict[str, float | None]
    live: dict[str, float | None]


def promotion_gate(candidate: Evaluation, live: Evaluation | None, *, tolerance: float = 0.01) -> GateDecision:
    """Whether the candidate may replace the live model; ``live=None`` (nothing live) passes if anything scored.

    Macro metrics are taken over the items both models score, on the same held-out rows.
    """
    if not candidate.items:
        return GateDecision(False, ["candidate scored no item on the held-out set"], {}, {})
    if live is None:
        summary = {"roc_auc": candidate.macro("roc_auc"), "brier": candidate.macro("brier")}
        return GateDecision(True, ["no live model to compare with"], summary, {})
    common = [i for i in candidate.items if i in live.items]
    cand = {"roc_auc": candidate.macro("roc_auc", common), "brier": candidate.macro("brier", common)}
    prev = {"roc_auc": live.macro("roc_auc", common), "brier": live.macro("brier", common)}
    reasons = []
    dropped = sorted(set(live.items) - set(candidate.items))
    if dropped:
        reasons.append(f"candidate does not score items the live model scores: {dropped}")
    if cand["roc_auc"] is not None and prev["roc_auc"] is not None and cand["roc_auc"] < prev["roc_auc"] - tolerance:
        reasons.append(f"macro ROC-AUC {cand['roc_auc']:.4f} < live {prev['roc_auc']:.4f} - tolerance {tolerance}")
    if cand["brier"] is not None and prev["brier"] is not None and cand["brier"] > prev["brier"] + tolerance:
        reasons.append(f"macro Brier {cand['brier']:.4f} > live {prev['brier']:.4f} + tolerance {tolerance}")
    passed = not reasons
    if passed:
        reasons.append(f"no worse than live on {len(common)} common items (tolerance {tolerance})")
    return GateDecision(passed, reasons, cand, prev)
