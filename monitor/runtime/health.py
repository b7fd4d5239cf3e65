"""The worker's HTTP endpoint: /metrics, and the probes /healthz (liveness) and /readyz (readiness).

Liveness: the event loop ticked within ``health_stall_s``. A loop blocked by a synchronous call
stops the heartbeat timer, so the probe fails while the HTTP thread still answers; Kubernetes then
restarts the pod. Before the loop's first tick the worker is starting (503), which is what a
startup probe waits for.

Readiness: the writer joined its consumer group and restored the state of every partition it was given (a
member that got no partitions is ready too), and the loop is not stalled. Served beside /metrics, on the metrics
port, by runtime/endpoint.py (its own thread and loop, so a stalled app loop is still reported).
"""

from __future__ import annotations

import time
from collections.abc import Callable

HEARTBEAT_S = 1.0


class Health:
    """Thread-safe enough by construction: the loop writes two fields, the HTTP threads only read them."""

    def __init__(self, stall_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_s = stall_s
        self.clock = clock
        self.last_tick: float | None = None
        self.joined = False
        self.assigned: Callable[[], int] | None = None  # input partitions this member owns, for the probe's text

    def tick(self) -> None:
        self.last_tick = self.clock()

    def live(self) -> tuple[bool, str]:
        if self.last_tick is None:
            return False, "starting: the event loop has not ticked yet"
        age = self.clock() - self.last_tick
        if age > self.stall_s:
            return False, f"stalled: the event loop last ticked {age:.0f}s ago (health_stall_s={self.stall_s:g})"
        return True, f"ok: the event loop ticked {age:.1f}s ago"

    def ready(self) -> tuple[bool, str]:
        live, why = self.live()
        if not live:
            return False, why
        if not self.joined:
            return False, "not ready: has not joined the consumer group yet"
        owned = f" (input partitions assigned: {self.assigned()})" if self.assigned is not None else ""
        return True, f"ok: joined the consumer group{owned}; event loop ticking"
