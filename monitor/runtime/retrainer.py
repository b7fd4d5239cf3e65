"""`convmon retrain`: the one retraining process of a deployment.

Each round trains the distilled per-rubric models from the label store, gates and publishes them,
then (``calibration_min_labels`` > 0) the satisfaction calibration; workers hot-reload what is
promoted. It runs in its own process, never inside a stream worker: a round takes seconds to
minutes of CPU, and a worker's event loop must keep heartbeating to its consumer group. Exactly
one retrainer per deployment: compose's ``retrainer`` service, or the Kubernetes CronJob running
``retrain --once``.

A failed part (store down, bad data, a bug) is logged in one line, counted in
``convmon_retrain_rounds_total{outcome="failed"}`` and retried at the next round; the live models stay.
SIGTERM or Ctrl-C mid-round abandons the round and exits at once (compose waits 10 s before it kills): a
model is published by a rename and promoted by a replace (distill/registry.py), so an abandoned round leaves
nothing half-written, and the next round trains from the label store again. The process then leaves without
interpreter finalization: that would end the round's thread with pthread_exit, and inside torch's or BLAS's C++
frames that aborts the process (SIGABRT, "terminate called without an active exception").
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

from monitor.contracts.metrics import RetrainMetrics
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import DistillSettings, RubricSettings, Settings

if TYPE_CHECKING:
    from distill.registry import ModelRegistry
    from distill.store import LabelStore

log = logging.getLogger("convmon.retrain")
PARTS = ("distilled", "calibration")
STOP_POLL_S = 0.2


@dataclass(frozen=True)
class Schedule:
    """When rounds run: a cron expression (croniter; a 6th field is seconds) or, deprecated, a fixed interval."""

    cron: str | None = None
    interval_s: float | None = None

    @classmethod
    def from_settings(cls, distill: DistillSettings) -> Schedule | None:
        """None when retraining is off (``CONVMON_RETRAIN_CRON=off`` and no interval)."""
        if distill.retrain_interval_s is not None:
            log.warning("CONVMON_RETRAIN_INTERVAL_S is deprecated: retraining every %gs; set CONVMON_RETRAIN_CRON "
                        "instead (for example '*/15 * * * *')", distill.retrain_interval_s)
            return cls(interval_s=distill.retrain_interval_s)
        if distill.retrain_cron is None:
            return None
        return cls(cron=distill.retrain_cron)

    def next_after(self, t: float) -> float:
        if self.interval_s is not None:
            return t + self.interval_s
        from croniter import croniter

        return float(croniter(self.cron, t).get_next(float))

    def describe(self) -> str:
        return f"every {self.interval_s:g}s" if self.interval_s is not None else f"cron '{self.cron}'"


class Retrainer:
    """Runs rounds; owns the label store connection, the model registry and the retraining metrics."""

    def __init__(self, distill: DistillSettings, rubrics: RubricSettings, *, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        from distill.registry import ModelRegistry
        from distill.store import LabelStore

        self.distill = distill
        self.clock = clock
        self.metrics = RetrainMetrics(registry if registry is not None else REGISTRY)
        self.rubric: RubricSet = load_rubric_set(rubrics.rubric_set, rubrics.prompts_dir)
        self.models: ModelRegistry = ModelRegistry(distill.model_registry)
        self.store: LabelStore = LabelStore.from_settings(distill)  # read and purge only: labels arrive redacted

    def close(self) -> None:
        self.store.close()

    def run_round(self) -> dict[str, str]:
        """Distilled models, then calibration (even if the first part failed); part -> outcome."""
        outcomes = {"distilled": self._part("distilled", self._distilled)}
        if self.distill.calibration_min_labels:
            outcomes["calibration"] = self._part("calibration", self._calibration)
        return outcomes

    def _part(self, part: str, run: Callable[[], str]) -> str:
        started = time.perf_counter()
        try:
            outcome = run()
        except Exception as exc:  # noqa: BLE001 - any failure: one line, a metric, the next round retries
            outcome = "failed"
            log.error("retrain %s failed, keeping the live model until the next round: %s: %s",
                      part, type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "")
            log.debug("retrain %s failure", part, exc_info=True)
        else:
            self.metrics.last_success.labels(part).set(self.clock())
        self.metrics.duration.labels(part).observe(time.perf_counter() - started)
        self.metrics.rounds.labels(part, outcome).inc()
        return outcome

    def _distilled(self) -> str:
        from distill.retrain import retrain_once

        result = retrain_once(self.distill, self.store, self.models, self.rubric,
                              report_dir=self.distill.distill_report_dir)
        log.info("retrain distilled %s: %s %s (%s)", self.rubric.key, result.status, result.version or "",
                 "; ".join(result.reasons))
        return result.status

    def _calibration(self) -> str:
        from distill.calibration.retrain import retrain_calibration

        result = retrain_calibration(self.distill, self.store, self.models, self.rubric)
        log.info("retrain calibration %s: %s %s (%s)", self.rubric.key, result.status, result.version or "",
                 "; ".join(result.reasons))
        return result.status

    def run_forever(self, schedule: Schedule, stop: threading.Event) -> bool:
        """A round at every scheduled time until ``stop`` is set; a slow round skips the times it overran.
        False when ``stop`` came mid-round: the round is abandoned, its thread still running."""
        while not stop.is_set():
            due = schedule.next_after(self.clock())
            self.metrics.next_round.set(due)
            log.info("next retraining round at %s (%s)", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(due)),
                     schedule.describe())
            if stop.wait(max(0.0, due - self.clock())):
                return True
            if not self._round_unless_stopped(stop):
                log.warning("stopped mid-round: the round is abandoned and nothing of it published; "
                            "the next round trains again")
                return False
        return True

    def _round_unless_stopped(self, stop: threading.Event) -> bool:
        """The round in a daemon thread, so that a stop is answered within a poll, not after minutes of training."""
        finished = threading.Event()

        def run() -> None:
            try:
                self.run_round()
            finally:
                finished.set()

        log.info("retraining round started")
        threading.Thread(target=run, name="retrain-round", daemon=True).start()
        while not finished.wait(STOP_POLL_S):
            if stop.is_set():
                return False
        return True


def run_retrainer(settings: Settings, *, once: bool) -> int:
    """`convmon retrain [--once]`; the exit code: 0, or 1 when a part of the (last) round failed."""
    schedule = Schedule.from_settings(settings.distill)
    if schedule is None:
        log.warning("retraining is off (CONVMON_RETRAIN_CRON=off): nothing to do")
        return 0
    retrainer = Retrainer(settings.distill, settings.rubrics)
    abandoned = False
    try:
        if once:
            return 1 if "failed" in retrainer.run_round().values() else 0
        start_http_server(settings.retrain_metrics_port, addr=settings.metrics_host)
        log.info("convmon retrain: %s; metrics on http://%s:%d/metrics", schedule.describe(), settings.metrics_host,
                 settings.retrain_metrics_port)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        abandoned = not retrainer.run_forever(schedule, stop)
        return 0
    finally:
        if abandoned:  # its thread may be in native code and still holds the store: the process exit closes it
            _exit_without_finalizing(0)
        retrainer.close()


def _exit_without_finalizing(code: int) -> NoReturn:
    """Flush what was logged, then ``os._exit``: nothing of an abandoned round needs finishing."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
