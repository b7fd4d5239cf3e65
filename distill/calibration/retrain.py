"""One calibration round: label store -> feedback training set -> fit -> gate -> publish ``calibration``.

Called by ``convmon calibrate train --label-store`` and by each ``convmon retrain`` round
(when ``calibration_min_labels`` > 0). The held-out set is chosen by a salted hash of the
conversation id, so a conversation is held out in every round: the live model never trained on
the rows it is compared on, and candidate and live model are scored on the same rows.

The gate compares held-out log-likelihoods of the target *as served*: with the shared model (no
label source) on every held-out label, or with ``label_source``'s offsets on that source's labels.
The candidate must beat the constant training-frequency baseline and the live model; it is
published either way (kept for inspection) and only moves ``LIVE`` when it passes.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from distill.calibration.baselines import ConstantMeanBaseline
from distill.calibration.crossval import smooth_ece
from distill.calibration.data import CalibrationDataError, CalibrationSet
from distill.calibration.feedback import (
    SATISFIED,
    FeedbackMapping,
    calibration_set_from_labels,
    manifest_problem,
    most_common_judge,
)
from distill.calibration.network import LLMRubricCalibrator, satisfied_probability
from distill.registry import ModelRegistry
from distill.store import DAY_S, LabelStore
from monitor.contracts.errors import ConvmonError
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.sections import DistillSettings

__all__ = ["KIND", "CalibrationResult", "heldout_mask", "retrain_calibration", "train_calibration"]

log = logging.getLogger(__name__)
KIND = "calibration"
MIN_HELDOUT_LABELS = 10
_SALT = b"convmon-calibration-holdout"  # independent of the judge-routing hash of the same ids
Status = Literal["promoted", "rejected", "skipped"]


@dataclass
class CalibrationResult:
    """``promoted``: live; ``rejected``: published, gate failed (or not asked to promote); ``skipped``."""

    status: Status
    reasons: list[str]
    n_labels: int
    version: str | None = None
    live_version: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


def heldout_mask(conversation_ids: Sequence[str] | np.ndarray, fraction: float) -> np.ndarray:
    """True for rows whose conversation is held out: the same conversations in every round."""
    if not 0 < fraction < 1:
        raise ValueError(f"The holdout fraction must be in (0, 1). Got {fraction!r} instead.")
    cut = int(fraction * 2**64)
    return np.asarray([int.from_bytes(hashlib.blake2b(str(c).encode(), digest_size=8, key=_SALT).digest(), "big")
                       < cut for c in conversation_ids], dtype=bool)


def _loglik(proba: np.ndarray, y_t: np.ndarray) -> float:
    return float(np.mean(np.log(np.clip(proba[np.arange(len(y_t)), y_t - 1], 1e-12, None))))


def _served(data: CalibrationSet, rows: np.ndarray, label_source: str | None
            ) -> tuple[np.ndarray, list[str] | None]:
    """Rows (of ``rows``) the served prediction answers for, and the ``judges`` to predict them with."""
    if label_source is None:
        return rows, None
    mine = rows[data.judges[rows] == label_source]
    return mine, [label_source] * len(mine)


def _live_loglik(registry: ModelRegistry, kind: str, rubric: RubricSet, llm_judge: str, X: np.ndarray,
                 y_t: np.ndarray, judges: list[str] | None) -> tuple[str | None, float | None, str | None]:
    """(live version, its held-out log-likelihood, why it is not comparable) on the candidate's rows."""
    version = registry.live_version(kind)
    if version is None:
        return None, None, None
    try:
        arrays, manifest = registry.load(kind, version)
        problem = manifest_problem(manifest, rubric) or (
            None if manifest.get("llm_judge") == llm_judge else f"it calibrates judge {manifest.get('llm_judge')!r}")
        if problem:
            return version, None, f"live {kind}/{version} not comparable: {problem}"
        live = LLMRubricCalibrator.from_arrays(arrays, manifest)
    except (ConvmonError, KeyError, ValueError) as exc:
        return version, None, f"live {kind}/{version} not comparable: {exc}"
    return version, _loglik(live.predict_proba(X, judges=judges), y_t), None


def _fit(data: CalibrationSet, rows: np.ndarray, params: dict[str, Any] | None, pooled: bool
         ) -> LLMRubricCalibrator:
    X, y, judges = data.X[rows], data.labels[rows], data.judges[rows]
    if pooled:  # each label again without its source: trains the shared weights alone
        X, y = np.concatenate([X, X]), np.concatenate([y, y])
        judges = np.concatenate([judges, np.full(len(rows), None, dtype=object)])
    hyper = {**(params or {}), "target_index": data.target_index, "n_options": data.n_options.tolist()}
    return LLMRubricCalibrator(**hyper).fit(X, y, judges=judges)


def _gate(metrics: dict[str, Any], live_version: str | None) -> tuple[bool, list[str]]:
    ll, base, live = metrics["log_likelihood"], metrics["baseline_log_likelihood"], metrics["live_log_likelihood"]
    reasons = []
    if ll <= base:
        reasons.append(f"held-out log-likelihood {ll:.4f} does not beat the constant baseline {base:.4f}")
    if live is not None and ll <= live:
        reasons.append(f"held-out log-likelihood {ll:.4f} does not beat live {live_version} ({live:.4f})")
    if reasons:
        return False, reasons
    return True, [f"held-out log-likelihood {ll:.4f} beats the baseline {base:.4f}"
                  + (f" and live {live_version} ({live:.4f})" if live is not None else "")]


def train_calibration(
    data: CalibrationSet, *, rubric: RubricSet, llm_judge: str, registry: ModelRegistry,
    mapping: FeedbackMapping | None = None, params: dict[str, Any] | None = None, holdout_fraction: float = 0.25,
    label_source: str | None = None, promote: bool = True, pooled: bool = True, kind: str = KIND,
) -> CalibrationResult:
    """Fit on the non-held-out labels, gate on the held-out ones, publish; promote if asked and passed.

    ``pooled`` adds every training label a second time without its source, so the shared weights
    alone (what a worker serves with no ``calibration_label_source``) are a fitted model of all
    sources together rather than whatever is left once the offsets absorbed each source.
    """
    mapping = mapping or FeedbackMapping()
    n, t = len(data), data.target_index
    test = heldout_mask(data.groups, holdout_fraction)
    train_rows, (test_rows, test_judges) = np.flatnonzero(~test), _served(data, np.flatnonzero(test), label_source)
    if len(test_rows) < MIN_HELDOUT_LABELS:
        return CalibrationResult("skipped", [f"too few held-out labels for the gate: {len(test_rows)} < "
                                             f"{MIN_HELDOUT_LABELS} (label source {label_source!r})"], n)
    if len(set(data.labels[train_rows, t].tolist())) < 2:
        return CalibrationResult("skipped", ["the training labels are all one answer: nothing to calibrate"], n)
    started = time.perf_counter()
    model = _fit(data, train_rows, params, pooled)
    fit_s = time.perf_counter() - started
    X_te, y_te = data.X[test_rows], data.labels[test_rows, t]
    proba = model.predict_proba(X_te, judges=test_judges)
    base_rows = _served(data, train_rows, label_source)[0]
    base_rows = base_rows if len(base_rows) else train_rows  # a source unseen in training: the pooled rate
    base = ConstantMeanBaseline(target_index=t, n_options=data.n_options.tolist())
    base_proba = base.fit(data.X[base_rows], data.labels[base_rows]).predict_proba(X_te)
    live_version, live_ll, note = _live_loglik(registry, kind, rubric, llm_judge, X_te, y_te, test_judges)

    def ece(p: np.ndarray) -> float:
        return smooth_ece(satisfied_probability(p, model.classes_, threshold=SATISFIED), y_te == SATISFIED)

    metrics = {
        "heldout_labels": len(test_rows), "train_labels": len(train_rows), "fit_seconds": round(fit_s, 3),
        "log_likelihood": _loglik(proba, y_te), "baseline_log_likelihood": _loglik(base_proba, y_te),
        "live_log_likelihood": live_ll, "smooth_ece": ece(proba), "baseline_smooth_ece": ece(base_proba),
        "satisfied_rate": float(np.mean(y_te == SATISFIED)),
    }
    passed, reasons = _gate(metrics, live_version)
    reasons += [note] if note else []
    reasons += [] if promote else ["not promoted: promotion not requested (--promote)"]
    arrays, meta = model.to_arrays()
    manifest = {
        **meta, "target": data.target, "questions": list(data.questions), "n_options": data.n_options.tolist(),
        "rubric_set": rubric.id, "rubric_version": rubric.version, "rubric_key": rubric.key,
        "llm_judge": llm_judge, "satisfied_label": SATISFIED, "label_sources": model.judges_.tolist(),
        "feedback_mapping": mapping.to_json(), "pooled": pooled, "gate_label_source": label_source,
        "n_labels": n, "n_conversations": len(data.dialogue_ids), "data_notes": data.notes, "metrics": metrics,
        "compared_with": live_version, "gate": {"passed": passed, "reasons": reasons},
    }
    version, promoted = registry.publish_if_better(kind, arrays, manifest, gate_passed=passed and promote)
    result = CalibrationResult("promoted" if promoted else "rejected", reasons, n, version=version,
                               live_version=live_version, metrics=metrics)
    log.info("calibration %s: %s %s (%s)", rubric.key, result.status, version, "; ".join(reasons))
    return result


def retrain_calibration(
    settings: DistillSettings, store: LabelStore, registry: ModelRegistry, rubric: RubricSet, *,
    now: float | None = None,
    params: dict[str, Any] | None = None, llm_judge: str | None = None, promote: bool = True,
) -> CalibrationResult:
    """Read the retention window's labels with feedback, train and gate; skipped below ``calibration_min_labels``."""
    now = time.time() if now is None else now
    since = now - settings.label_retention_days * DAY_S
    filters: dict[str, Any] = {"rubric_set": rubric.id, "rubric_version": rubric.version, "since": since,
                               "with_feedback": True}
    if llm_judge is not None:
        filters["judge"] = llm_judge
    minimum = max(settings.calibration_min_labels, 1)
    available = store.count(**filters)  # cheap: nothing is read below the minimum
    if available < minimum:
        return CalibrationResult("skipped", [f"insufficient feedback: {available} labelled conversations with "
                                             f"thumbs or CSAT < calibration_min_labels={minimum}"], available)
    records = store.fetch(**filters)
    judge = llm_judge or most_common_judge(records)
    mapping = FeedbackMapping(csat_neutral=settings.calibration_csat_neutral,
                              tenant_key=settings.calibration_tenant_key)
    try:
        data = calibration_set_from_labels(records, rubric, llm_judge=judge, mapping=mapping)
    except CalibrationDataError as exc:
        return CalibrationResult("skipped", [str(exc)], len(records))
    return train_calibration(data, rubric=rubric, llm_judge=judge, registry=registry, mapping=mapping,
                             params=params, holdout_fraction=settings.distill_holdout_fraction,
                             label_source=settings.calibration_label_source, promote=promote)
