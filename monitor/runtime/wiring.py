"""Everything the agents call, built once from settings: rubric, metrics, judge, distilled
scorer, calibration scorer, exporter and label writer. Retraining is `convmon retrain`'s job
(monitor/runtime/retrainer.py), never a worker's."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, CollectorRegistry

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.scores import ScoreRecord
from monitor.contracts.settings import Settings
from monitor.drift.monitor import DriftMonitor
from monitor.judge.base import Judge
from monitor.judge.build import build_judge
from monitor.judge.redact import Redactor
from monitor.runtime.allocator import export_anon, export_heap
from monitor.stages.export import Exporter
from monitor.stages.labels import LabelSink, RejectedOnce, both
from monitor.stages.sampler import InclusionPolicy

if TYPE_CHECKING:
    import httpx

    from distill.registry import ModelRegistry
    from distill.score_store import ScoreStore
    from distill.store import LabelStore
    from monitor.stages.calibrate import CalibrationScorer
    from monitor.stages.classify import DistilledScorer

log = logging.getLogger(__name__)


@dataclass
class Pipeline:
    settings: Settings
    rubric: RubricSet
    metrics: Metrics
    judge: Judge
    exporter: Exporter
    labels: LabelSink
    scorer: DistilledScorer
    store: LabelStore
    registry: ModelRegistry
    calibration: CalibrationScorer | None = None  # None: judge scores carry no satisfaction
    redactor: Redactor | None = None  # PII redaction for the label store and dead letters
    policy: InclusionPolicy | None = None  # the router's pi(x); None: the hash slice at sample_rate
    score_sink: LabelSink | None = None  # score_store: score records into the database for drill-down
    scores: ScoreStore | None = None  # the score items table: written by score_sink, purged by retention

    def classify(self, conversations: list[Conversation]) -> list[ScoreRecord]:
        """Distilled scores for a batch (the hot path marks the judge-sampled ones as shadows after routing)."""
        if not conversations:
            return []
        if self.scorer.maybe_reload():
            self.announce_model()
        started = time.perf_counter()  # after the poll above: a model load is not a batch's service time
        records = self.scorer.score_batch(conversations)
        if records is None:
            self.metrics.unscored.labels("no_model").inc(len(conversations))
            return []
        self.metrics.classify_batch_size.observe(len(conversations))
        self.metrics.classify_batch_duration.observe(time.perf_counter() - started)
        return records

    def announce_model(self) -> None:
        """A new live model: its metrics, its mean uncertainty for the router, its drift reference.

        The reference travels with the model version in the registry (cross-validated predictions on
        the hash slice of its training data), so a restart or another worker loads the same one.
        """
        live = self.scorer.live
        if live is not None:
            if self.policy is not None:
                self.policy.set_model(live.version, live.mean_uncertainty.get(self.policy.measure))
            drift = self.exporter.drift
            if drift is not None and live.reference:
                drift.set_reference({k: v for k, v in live.reference.items() if k in self.rubric.item_ids})
        version = self.scorer.model_version
        manifest = self.registry.manifest("distilled", version)
        self.metrics.model_info.info({"version": version or "", "rubric": self.rubric.key,
                                      "featurizer": str(manifest.get("featurizer_name", ""))})
        self.metrics.model_last_trained.set(float(manifest.get("created_at", 0.0)))

    def calibrate(self, score: ScoreRecord) -> ScoreRecord:
        """The judge score with calibrated P(satisfied) when a calibration model is live.

        A broken model must not stop the judge stage: any error is logged and counted, and the
        score is exported without satisfaction.
        """
        if self.calibration is None or score.scorer != "llm":
            return score
        try:
            if self.calibration.maybe_reload():
                self.announce_calibration()
            result = self.calibration.calibrate(score)
        except Exception as exc:
            log.warning("calibration failed, exporting the judge score without satisfaction: %s: %s",
                        type(exc).__name__, str(exc)[:200])
            self.metrics.satisfaction_uncalibrated.labels("error").inc()
            return score
        if result.satisfaction is None:
            self.metrics.satisfaction_uncalibrated.labels(result.skipped or "unknown").inc()
            return score
        return score.model_copy(update={"satisfaction": result.satisfaction})

    def announce_calibration(self) -> None:
        assert self.calibration is not None
        live = self.calibration.live
        assert live is not None
        self.metrics.calibration_info.info({"version": live.version, "rubric": self.rubric.key,
                                            "llm_judge": live.llm_judge or "",
                                            "label_source": self.calibration.label_source or "shared"})
        self.metrics.calibration_last_trained.set(float(live.trained_at or 0.0))


def service_dimension(settings: Settings) -> str | None:
    """The metric dimension read from ``service.name`` (``app`` by default): the judged app, whose name the
    evaluation events' resource carries. None when no configured dimension is (docs/otel.md)."""
    for dim in settings.metric_dimensions:
        if settings.otlp_dimension_attributes.get(dim, dim) == "service.name":
            return dim
    return None


def build_pipeline(
    settings: Settings,
    *,
    registry: CollectorRegistry | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> Pipeline:
    from distill.reference_key import conversation_ref
    from distill.registry import ModelRegistry
    from distill.score_store import ScoreStore
    from distill.store import LabelStore
    from monitor.stages.calibrate import CalibrationScorer
    from monitor.stages.classify import DistilledScorer

    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    metrics = Metrics(registry if registry is not None else REGISTRY, dimensions=tuple(settings.metric_dimensions))
    export_heap(metrics.heap_allocated, metrics.python_blocks)  # read on scrape: the live heap beside RSS
    export_anon(metrics.anon_memory)  # and what the heap misses: Python's object arenas
    drift = DriftMonitor.from_settings(metrics, rubric, settings.drift)
    redactor = Redactor.from_settings(settings.judge)
    store = LabelStore.from_settings(settings.distill, redact=redactor.redact)
    reference = conversation_ref(settings.pii_reference_key, store)  # exemplars carry it, never the id
    exporter = Exporter(metrics, dimensions=list(settings.metric_dimensions), cap=settings.dimension_cap,
                        rubric=rubric, drift=drift, allowed_values=settings.dimension_values,
                        value_pattern=settings.dimension_value_pattern,
                        series_budget=settings.metric_series_budget, reference=reference)
    judge = build_judge(settings.judge, settings.rubrics, rubric, metrics, ledger_url=settings.label_store_url,
                        http_client=http_client)
    if settings.otel_evaluation_events:  # imports the OpenTelemetry SDK: only when asked for
        from monitor.stages.evaluations import EvaluationEvents

        events = EvaluationEvents.from_environment(
            scorers=settings.otel_evaluation_scorers, redact=redactor.redact,
            metrics=metrics, queue_size=settings.otel_evaluation_queue_size, rubric=rubric,
            service_dimension=service_dimension(settings),
            conversation_ref=reference if settings.otel_evaluation_conversation_id == "reference" else None)
        events.judge, events.judge_version = judge.name, str(getattr(judge, "model_version", judge.name))
        exporter.evaluations, exporter.evaluation_failures = events.observe, events.failed
    models = ModelRegistry(settings.model_registry)
    scorer = DistilledScorer(models, rubric, poll_s=settings.registry_poll_s,
                             embedding_backend=settings.embedding_backend,
                             model_cache_dir=str(settings.model_cache_dir) if settings.model_cache_dir else None)
    once = RejectedOnce()  # a conversation the stores refuse is dead-lettered once per reason, not per record
    scores = ScoreStore(store, rubric, reference=reference, redact=redactor.redact,
                        retention_days=settings.score_retention_days)
    labels = LabelSink(both(store.upsert_raw, scores.upsert_labels) if settings.score_store else store.upsert_raw,
                       metrics, once=once)  # with the score store, labels also give its rows the judge's reasons
    score_sink = LabelSink(scores.upsert_raw, metrics, once=once) if settings.score_store else None
    calibration = CalibrationScorer(models, rubric, label_source=settings.calibration_label_source,
                                    poll_s=settings.registry_poll_s)
    policy = InclusionPolicy(base_rate=settings.sample_rate, active_rate=settings.active_learning_rate,
                             feedback_rate=settings.active_feedback_rate, measure=settings.active_uncertainty_measure,
                             salt=settings.sample_salt)
    pipeline = Pipeline(settings=settings, rubric=rubric, metrics=metrics, judge=judge, exporter=exporter,
                        labels=labels, scorer=scorer, store=store, registry=models, calibration=calibration,
                        redactor=redactor, policy=policy, score_sink=score_sink, scores=scores)
    if scorer.maybe_reload(force=True):  # the live model's drift reference before the first record is counted
        pipeline.announce_model()
    if calibration.maybe_reload(force=True):  # load (and import torch) now, not inside the first judge record
        pipeline.announce_calibration()
    for reason in ("no_model", "other_judge", "error"):
        metrics.satisfaction_uncalibrated.labels(reason)
    return pipeline
