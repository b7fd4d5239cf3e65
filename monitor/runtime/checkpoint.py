"""One checkpoint per worker: a batch's outputs and state changes are on the broker before its input offsets may
commit (quix-streams' ``Checkpoint.commit()`` is the model).

:meth:`Checkpoint.commit` takes what a batch sends (stages/scoring.py: re-keyed events, dead letters, the judge
slice, scores, labels), sends it, hands the counts (the ``scored`` table: dedup marks, totals, commit records)
to the producer, flushes it and waits for every delivery in flight. Only when every one was acknowledged are the
batch's totals exported (stages/totals.py) and, for a hot-path batch or sweep, the sessions' writes handed to
the producer: a crash in between re-delivers the batch to the sessions as they were before it, instead of to
tombstones of conversations whose counts were lost. The batch's events are acknowledged to faust after that,
and faust flushes the producer before it commits their offsets, so a batch's every write is on the broker
before its offsets commit.

faust's ``topic.send`` returns once a record is buffered, and a failed delivery did not stop faust's next
commit, so its input was never processed again. Here a failed one is counted
(``convmon_delivery_failures_total{topic}``), ``convmon_offset_commits_blocked`` goes to 1, no totals are
exported and no sessions' writes handed over any more, the consumer refuses every later commit (it asks
:meth:`Checkpoint.commit_allowed`: runtime/delivery.py) and ``EXIT_AFTER_S`` later (time for a scrape) the
worker exits. Its successor restores the tables from what the broker kept and re-reads everything after the last commit.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import faust

from monitor.contracts.metrics import Metrics
from monitor.runtime.app import Topics
from monitor.runtime.deadletter import DeadLetters
from monitor.runtime.tablestore import TableStore
from monitor.stages.hotpath import Send
from monitor.stages.scoring import Delivery
from monitor.stages.totals import PartitionTotals

log = logging.getLogger(__name__)
EXIT_AFTER_S = 20.0  # a failed delivery stops the worker this long after it is seen (one scrape, at least)


def exit_for_replay(error: BaseException) -> None:
    """Stop the worker at once, without committing anything more: its successor re-reads from the last commit."""
    log.critical("exiting after a failed delivery (%s)", type(error).__name__)
    logging.shutdown()
    os._exit(70)  # EX_SOFTWARE; a supervisor (Kubernetes, compose restart policy) starts the successor


class Checkpoint:
    def __init__(self, app: faust.App, topics: Topics, dead_letters: DeadLetters, metrics: Metrics, *,
                 counts: TableStore, sessions: TableStore, totals: PartitionTotals, partitions: int,
                 on_fatal: Callable[[BaseException], None] | None = None, exit_after_s: float = EXIT_AFTER_S) -> None:
        self.app, self.topics, self.dead_letters, self.metrics = app, topics, dead_letters, metrics
        self.counts, self.sessions, self.totals = counts, sessions, totals
        self.partitions = partitions  # convmon's: a record that names its partition goes to it modulo this
        self.on_fatal = on_fatal
        self.exit_after_s = exit_after_s
        self.failed: BaseException | None = None
        self._in_flight: dict[asyncio.Future[Any], str] = {}  # delivery futures, by topic name
        metrics.commits_blocked.set(0)

    async def commit(self, delivery: Delivery, *, sessions: bool = False) -> bool:
        """Send ``delivery``, then the counts; flush; check every delivery; then export what was counted and, with
        ``sessions``, hand the sessions' writes over. False once a delivery failed: the outputs still go out, but no
        totals are exported and no sessions' writes handed over, and no offset commits again."""
        for topic, sends in ((self.topics.rekeyed, delivery.rekey), (self.topics.judge, delivery.judge),
                             (self.topics.scores, delivery.scores), (self.topics.labels, delivery.labels)):
            await self._send(topic, sends)
        for letter in delivery.dead:
            self.watch(await self.dead_letters.send_letter(letter), self.topics.dead_letters.get_topic_name())
        counted = self.totals.written()
        await self._flush(self.counts)
        await self.app.producer.flush()
        if not await self._settled():
            return False
        counted()
        if sessions:
            await self._flush(self.sessions)  # on the broker before the offsets: faust flushes before a commit
        return True

    async def _send(self, topic: faust.TopicT, sends: Sequence[Send]) -> None:
        name = topic.get_topic_name()
        for send in sends:
            partition = None if send.partition is None else send.partition % self.partitions
            self.watch(await topic.send(key=send.key, value=send.value, headers=send.headers,
                                        timestamp=send.timestamp, partition=partition), name)

    async def _flush(self, store: TableStore) -> None:
        try:
            futures = await store.flush()
        except Exception as exc:  # the batches queued before it go unchecked: no offset may commit now
            self.fail(exc, store.label)
            raise
        for future in futures:
            self.watch(future, store.label)

    async def _settled(self) -> bool:
        """Wait for every delivery in flight (never cancelling one); whether all so far were acknowledged."""
        pending = list(self._in_flight)
        if pending:
            await asyncio.wait(pending)
        for future in pending:
            self._done(future)
        return self.failed is None

    def watch(self, future: object, topic: str) -> None:
        """Check the delivery of one record or batch (a faust ``FutureMessage``, an aiokafka future)."""
        if isinstance(future, asyncio.Future):
            self._in_flight[future] = topic
            future.add_done_callback(self._done)

    def _done(self, future: asyncio.Future[Any]) -> None:
        topic = self._in_flight.pop(future, None)
        error = asyncio.CancelledError() if future.cancelled() else future.exception()
        if topic is not None and error is not None:
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
        """What the consumer asks before every offset commit: False once any delivery failed, including one
        whose callback has not run yet."""
        for future in [f for f in self._in_flight if f.done()]:
            self._done(future)
        if self.failed is not None:
            self.metrics.commits_refused.inc()
            return False
        return True
