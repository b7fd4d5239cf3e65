"""The evaluation events' delivery: what was emitted, exported, dropped, and what waits in the queue.
Part of :class:`monitor.contracts.metrics.Metrics` (monitor/stages/otel_export.py counts them).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

# emitted = exported + export_failed + queue_full + shutdown + what is still queued or in flight
EVENT_OUTCOMES = ("emitted", "exported", "export_failed", "queue_full", "shutdown")


class OtelMetrics:
    """``gen_ai.evaluation.result`` events on their way to the OTLP endpoint: a stalled endpoint shows here."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.evaluation_events = Counter(
            "convmon_evaluation_events",
            "OTLP evaluation events by outcome: emitted (handed to the exporter's queue), exported (the endpoint "
            "accepted them), export_failed (the endpoint refused or was unreachable after the exporter's retries), "
            "queue_full (dropped: the queue held CONVMON_OTEL_EVALUATION_QUEUE_SIZE events), shutdown (lost at "
            "shutdown). emitted minus the rest is what is still queued.",
            ["outcome"], registry=r,
        )
        self.evaluation_queue = Gauge(
            "convmon_evaluation_events_queued", "Evaluation events queued or being exported, not yet acknowledged.",
            registry=r,
        )
        self.otlp_content = Counter(
            "convmon_otlp_content_fetches",
            "GenAI calls whose messages were fetched by reference (CONVMON_OTLP_CONTENT_RESOLVER), by outcome: "
            "fetched, or why not (bad_reference, host_not_allowed, redirect, not_found, http_error, timeout, "
            "unreachable, too_large, other); a call that could not be fetched gives no turns.",
            ["outcome"], registry=r,
        )
        self.evaluation_queue_capacity = Gauge(
            "convmon_evaluation_events_queue_capacity",
            "How many evaluation events the queue holds before it drops (CONVMON_OTEL_EVALUATION_QUEUE_SIZE).",
            registry=r,
        )
