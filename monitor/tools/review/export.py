"""The agreement estimates into the review page's gauges, recomputed on each scrape."""

from __future__ import annotations

from typing import Any

from monitor.contracts.metrics_review import BOUNDS, ReviewMetrics
from monitor.contracts.settings import Settings
from monitor.stages.human_agreement import Estimate


def export_metrics(metrics: ReviewMetrics, stats: dict[str, dict[str, Any]], settings: Settings) -> None:
    """Set every gauge from ``stats`` (item -> statistics); an item without reviews, or a statistic no review
    defines, is absent rather than 0."""
    gauges = {"agreement": metrics.agreement, "kappa": metrics.kappa, "precision": metrics.precision,
              "recall": metrics.recall, "corrected_rate": metrics.corrected_rate}
    for gauge in (*gauges.values(), metrics.labels):
        gauge.clear()
    for item, values in stats.items():
        metrics.labels.labels(item).set(values["labels"])
        for name, gauge in gauges.items():
            estimate: Estimate = values[name]
            if estimate.value is None:
                continue
            for bound, value in zip(BOUNDS, (estimate.value, estimate.low, estimate.high), strict=True):
                if value is not None:
                    gauge.labels(item, bound).set(value)
    metrics.floor.set(settings.review_agreement_floor)
    metrics.min_labels.set(settings.review_min_labels)
    metrics.page.info({"url": settings.ui_url.rstrip("/")})
