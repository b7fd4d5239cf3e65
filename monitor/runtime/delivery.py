"""Every produce the worker makes is watched; a failed one stops offset commits, then the worker (#18 item 7).
Table writes still waiting in a store are handed to the producer and delivered before any commit.

faust's ``topic.send`` and a table's changelog write return once the record is buffered; whether the
broker took it is a future nobody awaits (a failure was only logged: "exception was never
retrieved"). faust flushes the producer before it commits consumed offsets, but a failed record does
not stop that commit, so its input would never be processed again. Here every send's and changelog
write's future is registered with a :class:`DeliveryGuard`: a failure is counted
(``convmon_delivery_failures_total{topic}``), ``convmon_offset_commits_blocked`` goes to 1, the
consumer refuses every later commit (``GuardedConsumer``, through faust's transport classes, the
supported way to change the consumer), and after ``EXIT_AFTER_S`` (time for a scrape) the worker
crashes. Its successor restores the tables from what the broker kept and re-reads everything after
the last commit, so nothing the broker acknowledged is lost and nothing it did not is skipped.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, AppT

from monitor.contracts.metrics import Metrics
from monitor.runtime.batchsend import BatchingProducer
from monitor.runtime.seeks import SeekingConsumer

log = logging.getLogger(__name__)
EXIT_AFTER_S = 20.0  # a failed delivery stops the worker this long after it is seen (one scrape, at least)


class DeliveryGuard:
    def __init__(self, metrics: Metrics, *, on_fatal: Callable[[BaseException], None] | None = None,
                 exit_after_s: float = EXIT_AFTER_S) -> None:
        self.metrics = metrics
        self.on_fatal = on_fatal
        self.exit_after_s = exit_after_s
        self.failed: BaseException | None = None
        self._in_flight: dict[asyncio.Future[Any], str] = {}
        self._barriers: list[Callable[[], Awaitable[int]]] = []
        metrics.commits_blocked.set(0)

    def before_commit(self, flush: Callable[[], Awaitable[int]]) -> None:
        """Register a store's flush: every commit first hands its pending writes to the producer
        (runtime/tablestore.py), as faust flushes its own producer buffer before a commit."""
        self._barriers.append(flush)

    async def flush_pending(self) -> int:
        """Hand every registered store's pending writes to the producer; how many there were."""
        return sum([await flush() for flush in self._barriers])

    def watch(self, future: object, topic: str) -> None:
        """Register the delivery future of one record (a faust ``FutureMessage``)."""
        if not isinstance(future, asyncio.Future):
            return
        self._in_flight[future] = topic
        future.add_done_callback(self._done)

    def _done(self, future: asyncio.Future[Any]) -> None:
        topic = self._in_flight.pop(future, "?")
        error = asyncio.CancelledError() if future.cancelled() else future.exception()
        if error is not None:
            self.fail(error, topic)

    def fail(self, error: BaseException, topic: str) -> None:
        self.metrics.delivery_failures.labels(topic).inc()
        self.metrics.commits_blocked.set(1)
        if self.failed is None:
            self.failed = error
            log.error("a record to %s was not delivered (%s): offsets stop committing; the worker stops in %.0fs "
                      "and its successor re-reads from the last commit", topic, type(error).__name__,
                      self.exit_after_s)
            if self.on_fatal is not None:
                asyncio.get_running_loop().call_later(self.exit_after_s, self.on_fatal, error)

    def commit_allowed(self) -> bool:
        """False once any delivery failed, including one whose callback has not run yet."""
        for future in [f for f in self._in_flight if f.done()]:
            self._done(future)
        if self.failed is not None:
            self.metrics.commits_refused.inc()
            return False
        return True


_GUARDS: weakref.WeakKeyDictionary[AppT, DeliveryGuard] = weakref.WeakKeyDictionary()


def install(app: AppT, guard: DeliveryGuard) -> None:
    """Make ``guard`` the one ``app``'s consumer asks before every offset commit."""
    _GUARDS[app] = guard


class GuardedConsumer(SeekingConsumer):
    """faust's aiokafka consumer that commits nothing once the app's delivery guard saw a failure (and which reads
    a stream partition again where its records jump instead of committing over them: runtime/seeks.py). Against
    Tansu its subclass in runtime/log_ends.py also checks table restore ends."""

    async def _commit(self, offsets: Mapping[TP, int]) -> bool:
        guard = _GUARDS.get(self.app)
        if guard is not None and await guard.flush_pending():
            await self.app.producer.flush()  # the table writes are on the broker before their input's offsets
        if guard is not None and not guard.commit_allowed():
            return False
        return bool(await super()._commit(offsets))


class GuardedTransport(faust_aiokafka.Transport):
    Consumer = GuardedConsumer
    Producer = BatchingProducer
