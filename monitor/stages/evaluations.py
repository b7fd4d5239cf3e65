"""Verdicts out as OpenTelemetry ``gen_ai.evaluation.result`` log events (``otel_evaluation_events``).

One event per rubric item of every counted score record (the exporter calls :meth:`observe` once
per (scorer, conversation)), parented to the judged call's span when the input carried it (OTLP
input), so Tempo, Langfuse, Phoenix or any OTLP backend show the verdicts on the trace; without
a span the event carries ``gen_ai.response.id`` when known, and always ``gen_ai.conversation.id``.
Sent by the OpenTelemetry SDK's ``LoggerProvider`` through a batching OTLP/HTTP log exporter,
configured by the standard ``OTEL_*`` variables (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``..._LOGS_ENDPOINT``, ``..._HEADERS``, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_BLRP_*``). This module imports the SDK: it is imported only when the setting is on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opentelemetry._logs import Logger
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from monitor.contracts.scores import ItemResult, ScoreRecord, verdict_label

EVENT = "gen_ai.evaluation.result"
Redact = Callable[[str], str]


def parent(span: str | None) -> Context | None:
    """The judged call's span as a remote parent context, from the ``<trace>-<span>`` hex the turn carried."""
    if not span:
        return None
    trace_hex, _, span_hex = span.partition("-")
    ctx = SpanContext(int(trace_hex, 16), int(span_hex, 16), is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return set_span_in_context(NonRecordingSpan(ctx))


def score_value(item: ItemResult) -> float | None:
    """The judge's 0-10 score, else a probability, else the verdict as 1/0."""
    if item.score is not None:
        return float(item.score)
    if item.probability is not None:
        return float(item.probability)
    return None if item.verdict is None else float(item.verdict)


class EvaluationEvents:
    def __init__(self, logger: Logger, *, scorers: Sequence[str], redact: Redact,
                 provider: LoggerProvider | None = None) -> None:
        self.logger = logger
        self.scorers = frozenset(scorers)
        self.redact = redact
        self.provider = provider

    @classmethod
    def from_environment(cls, *, scorers: Sequence[str], redact: Redact,
                         exporter: LogRecordExporter | None = None) -> EvaluationEvents:
        """A LoggerProvider with a batching OTLP/HTTP exporter, both configured by the OTEL_* variables."""
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

            exporter = OTLPLogExporter()
        resource = Resource.create({"service.name": "convmon"}).merge(OTELResourceDetector().detect())
        provider = LoggerProvider(resource=resource)
        provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
        return cls(provider.get_logger("convmon"), scorers=scorers, redact=redact, provider=provider)

    def observe(self, record: ScoreRecord) -> None:
        if record.scorer not in self.scorers:
            return
        context = parent(record.span)
        timestamp = int(record.scored_at * 1e9)
        common: dict[str, str | float] = {"gen_ai.conversation.id": record.conversation_id,
                                          "convmon.scorer": record.scorer, "convmon.judge": record.judge,
                                          "convmon.rubric_set": f"{record.rubric_set}@{record.rubric_version}"}
        if record.response_id:
            common["gen_ai.response.id"] = record.response_id
        for item in record.items:
            attributes = {**common, "gen_ai.evaluation.name": item.item_id,
                          "gen_ai.evaluation.score.label": verdict_label(record.scorer, item),
                          "convmon.polarity": item.polarity}
            value = score_value(item)
            if value is not None:
                attributes["gen_ai.evaluation.score.value"] = value
            if item.explanation:  # judges quote user text: never out unredacted
                attributes["gen_ai.evaluation.explanation"] = self.redact(item.explanation)
            self.logger.emit(timestamp=timestamp, context=context, event_name=EVENT, attributes=attributes)

    def shutdown(self) -> None:
        if self.provider is not None:
            self.provider.shutdown()
