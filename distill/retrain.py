"""One retraining round: recent labels -> train -> evaluate -> gate -> publish (and maybe promote).

Called by ``convmon retrain`` (each round) and by ``convmon distill train [--schedule]``. A round is
idempotent and safe to run concurrently with scoring: the candidate is written atomically to the
registry, and only a gate pass moves ``LIVE``; workers pick it up on their next poll.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Literal

from distill.featurizers.spec import make_featurizer
from distill.human_labels import HumanLabelStore, with_human_answers
from distill.promotion import Evaluation, evaluate, promotion_gate
from distill.registry import ModelRegistry
from distill.retrain_result import RetrainResult
from distill.serving import KIND, load_live
from distill.store import DAY_S, LabelStore
from distill.train import Progress, TrainedModel, TrainingSet, dataset_from_records, split_holdout, train_items
from monitor.contracts.errors import ConfigError, ModelError
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.sections import DistillSettings

log = logging.getLogger(__name__)
Status = Literal["promoted", "rejected", "skipped"]


def _live_evaluation(registry: ModelRegistry, rubric: RubricSet, test: TrainingSet, openai_client: Any,
                     kind: str, model_cache_dir: str | None) -> tuple[str | None, Evaluation | None, str | None]:
    version = registry.live_version(kind)
    if version is None:
        return None, None, None
    try:
        live = load_live(registry, rubric, version, kind=kind, openai_client=openai_client,
                         model_cache_dir=model_cache_dir)
    except ModelError as exc:  # e.g. trained for another rubric version: nothing comparable
        return version, None, f"live {kind}/{version} not comparable: {exc}"
    return version, evaluate(live.model, live.featurizer, test), None


def _cache_dir(settings: Any) -> str | None:
    return str(settings.model_cache_dir) if settings.model_cache_dir is not None else None


def train_evaluate_publish(
    data: TrainingSet, *, settings: DistillSettings, registry: ModelRegistry, rubric: RubricSet, featurizer: Any = None,
    kind: str = KIND, openai_client: Any = None, progress: Progress | None = None, report_dir: Path | None = None,
    seed: int = 0,
) -> RetrainResult:
    """Split, train, evaluate candidate and live model on the same held-out rows, gate, publish."""
    try:
        train, test = split_holdout(data, test_size=settings.distill_holdout_fraction, seed=seed)
    except ConfigError as exc:
        return RetrainResult("skipped", [str(exc)], len(data))
    spec = featurizer if featurizer is not None else settings.featurizer
    cache_dir = _cache_dir(settings)
    if isinstance(spec, str):  # the setting picks MiniLM's backend for new models
        spec = make_featurizer(spec, openai_client=openai_client, embedding_backend=settings.embedding_backend,
                               model_cache_dir=cache_dir)
    try:
        trained: TrainedModel = train_items(
            train, spec, rubric=rubric, min_positives=settings.distill_min_positives, progress=progress,
            info={"n_holdout": len(test)},
        )
    except ModelError as exc:
        return RetrainResult("skipped", [str(exc)], len(data))
    candidate = evaluate(trained.model, trained.featurizer, test)
    live_version, live_eval, note = _live_evaluation(registry, rubric, test, openai_client, kind, cache_dir)
    gate = promotion_gate(candidate, live_eval, tolerance=settings.distill_gate_tolerance)
    manifest = {
        **trained.model.manifest(), "metrics": candidate.to_json(), "compared_with": live_version,
        "gate": {"passed": gate.passed, "reasons": gate.reasons, "candidate": gate.candidate, "live": gate.live},
    }
    version, promoted = registry.publish_if_better(kind, trained.model.to_arrays(), manifest, gate_passed=gate.passed)
    reasons = [*gate.reasons, *([note] if note else [])]
    result = RetrainResult(
        "promoted" if promoted else "rejected", reasons, len(data), version=version, live_version=live_version,
        item_status=trained.status, evaluation=candidate, live_evaluation=live_eval, gate=gate,
    )
    if report_dir is not None:
        from distill.retrain_report import write_report  # matplotlib only when a report is asked for

        result.report = write_report(result, Path(report_dir) / version, rubric=rubric)
    log.info("retrain %s: %s %s (%s)", rubric.key, result.status, version, "; ".join(reasons))
    return result


def retrain_once(
    settings: DistillSettings, store: LabelStore, registry: ModelRegistry, rubric: RubricSet, *, featurizer: Any = None,
    now: float | None = None, kind: str = KIND, openai_client: Any = None, progress: Progress | None = None,
    report_dir: Path | None = None,
) -> RetrainResult:
    """Purge labels past retention, train from the rest of ``rubric``'s labels, gate and publish."""
    now = time.time() if now is None else now
    purged = store.purge(older_than_days=settings.label_retention_days, now=now)  # retention runs with training
    since = now - settings.label_retention_days * DAY_S
    records = store.fetch(rubric_set=rubric.id, rubric_version=rubric.version, since=since)
    records = with_human_answers(records, HumanLabelStore(store).fetch(since=since))  # people win over the judge
    if len(records) < settings.retrain_min_labels:
        return RetrainResult(
            "skipped", [f"insufficient labels: {len(records)} < retrain_min_labels={settings.retrain_min_labels}"],
            len(records), purged=purged,
        )
    data = dataset_from_records(records, rubric)
    result = train_evaluate_publish(
        data, settings=settings, registry=registry, rubric=rubric, featurizer=featurizer, kind=kind,
        openai_client=openai_client, progress=progress, report_dir=report_dir,
    )
    result.purged = purged
    return result
