"""A worker whose input stays empty says so: a wrong topic prefix, a producer sending elsewhere or a topic
nobody writes to would otherwise look exactly like a quiet night.

``convmon_input_idle_seconds`` is the time since this worker last consumed an input record (an event
of any kind, or a record it dead-lettered), or since its start; past ``input_idle_warn_s`` one warning
names the topic, and one line reports when records arrive again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from monitor.contracts.metrics import Metrics

log = logging.getLogger(__name__)


def _total(metrics: Metrics) -> float:
    """Input records this worker has consumed: events by kind plus dead letters (their samples' sum)."""
    return sum(sample.value for family in (metrics.events, metrics.dead_letters) for metric in family.collect()
               for sample in metric.samples if sample.name.endswith("_total"))


class InputWatch:
    def __init__(self, metrics: Metrics, topic: str, warn_after_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.metrics = metrics
        self.topic = topic
        self.warn_after_s = warn_after_s
        self.clock = clock
        self.last_total = _total(metrics)
        self.last_change = clock()
        self.warned = False

    def check(self) -> str | None:
        """Update the gauge; the line to log when the input has just gone quiet for too long, or came back."""
        now, total = self.clock(), _total(self.metrics)
        if total != self.last_total:
            self.last_total, self.last_change = total, now
            if self.warned:
                self.warned = False
                self.metrics.input_idle.set(0.0)
                return f"input records are arriving on {self.topic} again"
        idle = now - self.last_change
        self.metrics.input_idle.set(idle)
        if idle >= self.warn_after_s and not self.warned:
            self.warned = True
            return (f"no input record on {self.topic} for {idle:.0f} s: is the producer sending to this "
                    "topic (CONVMON_INPUT_TOPIC, CONVMON_TOPIC_PREFIX, CONVMON_BROKER_URL)? With more workers than "
                    "partitions an idle worker sees this too (CONVMON_INPUT_IDLE_WARN_S)")
        return None
