"""The OTLP log pipeline behind the evaluation events: the exporter the ``OTEL_*`` variables ask for, a
bounded queue whose every event is counted, and one resource per judged app.

- Protocol: ``OTEL_EXPORTER_OTLP_LOGS_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``, else
  ``http/protobuf``; ``grpc`` needs the ``grpc`` extra (``opentelemetry-exporter-otlp-proto-grpc``).
  Endpoint, headers, timeout and TLS come from the same variables, read by the SDK's exporters.
- Queue: the SDK's ``BatchLogRecordProcessor`` drops the oldest record of a full queue with one
  rate-limited log line and no count. :class:`CountedProcessor` bounds the queue itself
  (``CONVMON_OTEL_EVALUATION_QUEUE_SIZE``, in place of ``OTEL_BLRP_MAX_QUEUE_SIZE``), counts what it
  refuses, and gives the SDK's queue a batch of headroom so that it never drops on its own: every event
  ends in ``convmon_evaluation_events_total`` as exported, export_failed, queue_full or shutdown.
- Resource: an OpenTelemetry resource is per provider, so :class:`Loggers` keeps one ``LoggerProvider``
  per judged app (``service.name``), all feeding the one processor (one queue, one export thread).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence

from opentelemetry._logs import Logger
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadableLogRecord, ReadWriteLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from monitor.contracts.errors import ConfigError
from monitor.contracts.metrics_otel import EVENT_OUTCOMES, OtelMetrics

PROTOCOLS = ("http/protobuf", "grpc")
MAX_SERVICES = 64  # providers kept for distinct judged apps; events of further apps carry convmon's resource
EVALUATOR_SERVICE = "convmon.evaluator.service.name"  # convmon's own service.name on a judged app's resource


def protocol(env: Mapping[str, str] = os.environ) -> str:
    """The OTLP protocol the standard variables ask for (the logs-specific one first)."""
    for name in ("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = env.get(name, "").strip().lower()
        if value:
            if value not in PROTOCOLS:
                raise ConfigError(f"{name}={value!r}: convmon sends evaluation events over "
                                  f"{' or '.join(PROTOCOLS)} (the SDK has no http/json log exporter)")
            return value
    return "http/protobuf"


def otlp_exporter(env: Mapping[str, str] = os.environ) -> LogRecordExporter:
    """The SDK's OTLP log exporter for :func:`protocol`; it reads endpoint, headers, TLS from the variables."""
    if protocol(env) == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcExporter
        except ImportError:
            raise ConfigError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter: "
                              "pip install 'convmon[grpc]' (opentelemetry-exporter-otlp-proto-grpc)") from None
        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpExporter

    return HttpExporter()


class CountedProcessor(LogRecordProcessor):
    """A ``BatchLogRecordProcessor`` behind a counted bound. ``pending`` is every event accepted and not yet
    handed to the exporter, so it is never below the SDK queue's length: with ``max_queue_size`` plus one
    export batch of room, the SDK queue cannot overflow, and only this class drops (and counts it)."""

    def __init__(self, exporter: LogRecordExporter, metrics: OtelMetrics, *, max_queue_size: int,
                 env: Mapping[str, str] = os.environ) -> None:
        self.metrics = metrics
        self.max_queue_size = max_queue_size
        self._counters = {o: metrics.evaluation_events.labels(o) for o in EVENT_OUTCOMES}  # all at 0 from the start
        self._lock = threading.Lock()
        self._pending = 0
        self._closed = False
        batch = min(int(env.get("OTEL_BLRP_MAX_EXPORT_BATCH_SIZE") or 512), max_queue_size)
        self.batch = BatchLogRecordProcessor(_CountingExporter(exporter, self), max_export_batch_size=batch,
                                             max_queue_size=max_queue_size + batch)
        metrics.evaluation_queue_capacity.set(max_queue_size)
        metrics.evaluation_queue.set_function(lambda: self._pending)

    def count(self, outcome: str, n: int = 1) -> None:
        self._counters[outcome].inc(n)

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        with self._lock:
            if self._closed:
                outcome = "shutdown"
            elif self._pending >= self.max_queue_size:
                outcome = "queue_full"
            else:
                self._pending += 1
                outcome = "emitted"
        self.count("emitted")
        if outcome != "emitted":
            self.count(outcome)
            return
        self.batch.on_emit(log_record)

    def taken(self, n: int) -> None:
        """``n`` events left the queue for the exporter."""
        with self._lock:
            self._pending = max(0, self._pending - n)

    def shutdown(self) -> None:
        """Exports what is queued (within the SDK's shutdown timeout); what is left then is lost, and counted."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.batch.shutdown()  # type: ignore[no-untyped-call]
        with self._lock:
            lost, self._pending = self._pending, 0
        if lost:
            self.count("shutdown", lost)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.batch.force_flush(timeout_millis)


class _CountingExporter(LogRecordExporter):
    """The real exporter, its results counted per event."""

    def __init__(self, inner: LogRecordExporter, processor: CountedProcessor) -> None:
        self.inner = inner
        self.processor = processor

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        n = len(batch)
        self.processor.taken(n)
        try:
            result = self.inner.export(batch)
        except Exception:
            self.processor.count("export_failed", n)
            raise  # the SDK logs it
        self.processor.count("exported" if result == LogRecordExportResult.SUCCESS else "export_failed", n)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class Loggers:
    """A logger per judged app: its ``service.name`` on the resource (convmon's own in
    ``convmon.evaluator.service.name``), so a backend groups the evaluations with the app's traces."""

    def __init__(self, resource: Resource, processor: CountedProcessor) -> None:
        self.resource = resource
        self.processor = processor
        self.provider = LoggerProvider(resource=resource)  # shut down at exit: flushes the shared queue
        self.provider.add_log_record_processor(processor)
        self.default = self.provider.get_logger("convmon")
        self._by_service: dict[str, Logger] = {}
        self._lock = threading.Lock()

    def get(self, service: str | None) -> Logger:
        if not service:
            return self.default
        logger = self._by_service.get(service)
        if logger is not None:
            return logger
        with self._lock:
            if len(self._by_service) >= MAX_SERVICES:
                return self.default
            own = self.resource.attributes.get(SERVICE_NAME, "convmon")
            provider = LoggerProvider(resource=self.resource.merge(Resource({SERVICE_NAME: service,
                                                                             EVALUATOR_SERVICE: str(own)})),
                                      shutdown_on_exit=False)  # it holds no thread: the default provider's exit
            provider.add_log_record_processor(self.processor)  # shutdown drains the shared processor
            logger = self._by_service[service] = provider.get_logger("convmon")
        return logger

    def shutdown(self) -> None:
        self.provider.shutdown()
