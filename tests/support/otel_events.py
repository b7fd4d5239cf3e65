"""Evaluation events through the real OpenTelemetry SDK with an exporter the test chooses (in memory, failing)."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, LogRecordExporter
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.judge.redact import Redactor
from monitor.stages.evaluations import EvaluationEvents
from tests.support.hot_path import RUBRIC


def events(exporter: LogRecordExporter, scorers: Sequence[str] = ("llm", "distilled"), queue_size: int = 8192
           ) -> tuple[EvaluationEvents, Metrics]:
    metrics = Metrics(CollectorRegistry())
    out = EvaluationEvents.from_environment(scorers=scorers, redact=Redactor().redact, metrics=metrics,
                                            queue_size=queue_size, exporter=exporter, rubric=RUBRIC,
                                            service_dimension="app")
    out.judge, out.judge_version = "openai:gpt-4o-mini", "gpt-4o-mini"
    return out, metrics


def finished(memory: InMemoryLogRecordExporter) -> list[ReadableLogRecord]:
    return list(memory.get_finished_logs())
