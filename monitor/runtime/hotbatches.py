"""The hot path reads batches: the records a fetch returns for the input and re-keyed topics go to
one handler as a list, not through faust's per-record delivery.

faust delivers a record at a time: the conductor, a channel queue, a stream, a task and an ``asyncio.wait`` per
record. On turn events that alone cost more CPU than the monitor's own work. :class:`BatchingConsumer` hands the
hot topics' records of every fetch to :class:`HotBatches` instead; the hot-path task (runtime/agents.py) takes them
a batch at a time and acknowledges them to the consumer once the checkpoint has the batch's outputs on the
broker. Everything else stays faust's: the consumer group and its assignor (which co-partitions the tables and
the judge topic with the input), table restore, offset commits of acknowledged records only, the seek to the
committed offsets after a rebalance, and the other agents' records, which still go through the conductor.

A rebalance clears what was fetched and not yet taken, as faust clears its agents' queues (``flow_control``):
the partitions are sought back to their committed offsets and read again. The records of the batch being
processed are tracked as unacknowledged, so the revocation's last commit waits for them
(``Consumer.wait_empty``). Fetching overlaps processing: the consumer goes on fetching while a batch is
processed, until ``max_pending`` records wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

from faust.types import TP, Message

from monitor.runtime.seeks import SeekingConsumer

if TYPE_CHECKING:
    import faust

log = logging.getLogger(__name__)
Handler = Callable[[list[Message]], Awaitable[None]]


class HotBatches:
    """Records fetched for the hot path, taken a batch at a time. ``clear()`` is called by faust's flow control
    (it manages this like its own queues): on every revocation and when the flow resumes after a rebalance."""

    def __init__(self, app: faust.App, topics: Collection[str], *, max_pending: int,
                 on_drop: Callable[[TP, int], None] | None = None) -> None:
        self.app = app
        self.topics = frozenset(topics)
        self.max_pending = max_pending
        self.on_drop = on_drop  # (partition, first offset dropped): the consumer reads it again from there
        self._pending: list[Message] = []
        self._taken: list[Message] = []  # the batch the handler is processing
        self._changed = asyncio.Event()  # records were added or cleared
        self._room = asyncio.Event()  # fewer than max_pending records wait
        self._room.set()
        app.flow_control.manage_queue(self)  # type: ignore[arg-type]  # it asks only for clear()

    async def put(self, messages: list[Message], generation_id: int) -> None:
        """From the consumer's fetch loop: waits while ``max_pending`` records wait. Records fetched before a
        rebalance (another generation, or the flow suspended) are dropped: the seek after it reads them again."""
        while len(self._pending) >= self.max_pending:
            self._room.clear()
            await self._room.wait()
        if self.app.flow_control.is_active() and self.app.consumer_generation_id == generation_id:
            self._pending.extend(messages)
            self._changed.set()
        else:
            self._dropped(messages)

    def waiting(self) -> Counter[TP]:
        """Records fetched and not yet processed, per partition: the consumer's read offset is already past them,
        so the lag gauges subtract them (runtime/agents.py ``processed_offsets``)."""
        return Counter(m.tp for m in (*self._pending, *self._taken))

    def clear(self) -> None:
        self._dropped(self._pending)
        self._pending = []
        self._changed.set()
        self._room.set()

    def _dropped(self, messages: list[Message]) -> None:
        """Records fetched and never processed: read again from the first of each partition. A partition the
        worker no longer owns is read by its next owner from the last commit."""
        if self.on_drop is None:
            return
        first: dict[TP, int] = {}
        for message in messages:
            if message.offset < first.get(message.tp, message.offset + 1):
                first[message.tp] = message.offset
        for tp, offset in first.items():
            self.on_drop(tp, offset)

    async def batches(self, size: int, *, within: float) -> AsyncIterator[list[Message]]:
        """Up to ``size`` records at a time, as soon as ``size`` wait or ``within`` seconds after the first."""
        loop = asyncio.get_running_loop()
        while True:
            while not self._pending:
                self._changed.clear()
                await self._changed.wait()
            deadline = loop.time() + within
            while len(self._pending) < size and self._pending and (left := deadline - loop.time()) > 0:
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), left)
                except TimeoutError:
                    break
            batch, self._pending = self._pending[:size], self._pending[size:]
            if len(self._pending) < self.max_pending:
                self._room.set()
            if batch:
                yield batch

    async def run(self, handler: Handler, size: int, *, within: float) -> None:
        """The hot-path task: each batch to ``handler``, then acknowledged (the checkpoint already refuses every
        later commit if one of its deliveries failed). An exception stops the worker: nothing is acknowledged."""
        try:
            async for batch in self.batches(size, within=within):
                self._taken = batch
                await handler(batch)
                ack = self.app.consumer.ack
                for message in batch:
                    ack(message)
                self._taken = []
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.critical("the hot path failed (%s): the worker stops", type(exc).__name__, exc_info=True)
            await self.app.crash(exc)


class BatchingConsumer(SeekingConsumer):
    """faust's aiokafka consumer (with runtime/seeks.py's re-reads) that hands the hot topics' records of each fetch
    to the app's :class:`HotBatches` as one list; the other topics' records go on to faust's conductor."""

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Message]]:
        hot: HotBatches | None = getattr(self.app, "hot_batches", None)
        generation_id = self.app.consumer_generation_id
        batch: list[Message] = []
        read: dict[TP, int | None] = self._read_offset  # type: ignore[assignment]
        unacked: Any = self._unacked_messages
        async for tp, message in super().getmany(timeout):
            if hot is None or tp.topic not in hot.topics:
                yield tp, message
                continue
            # What faust's fetch loop (``Consumer._drain_messages``) does with a record before it goes to a channel,
            # inline (a coroutine per record cost more than the check): a record behind the read offset is dropped,
            # a jump past it is a gap; tracked as unacknowledged.
            offset, last = message.offset, read.get(tp)
            if last is not None and offset < last:
                continue
            if last and offset - last > 1:
                await self._add_gap(tp, last + 1, offset)
            read[tp] = offset
            unacked.add(message)
            batch.append(message)
        if batch and hot is not None:
            await hot.put(batch, generation_id)
