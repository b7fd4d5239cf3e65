"""A faust table as a :class:`monitor.stages.sessionize.Store`: every write names its changelog partition,
and a batch's writes go to the producer together.

``table[key] = value`` picks the changelog partition from ``current_event()``; inside a
``take_events`` batch (or a timer) that is not the event whose key is written, so recovery would
restore the key to the wrong worker. Here the caller passes the partition of the key's source
event, using the table's public ``data`` (local store) and changelog topic. An input topic with more
partitions than the changelog writes input partition p to changelog partition p mod n: every value names its
input partition, so a restore keeps what the owner of p owns; that is exact with one worker, and with several
only when the counts match (faust assigns input p and changelog p together then; docs/reliability.md).

faust's own ``send_changelog`` queues each record in its producer buffer, which hands them to the
producer one at a time, several event-loop turns each, and while more than 100 wait it stops
delivering input to every stream (``wait_until_ebb``). With one changelog record per turn event that
buffer set the worker's pace: in ``bench throughput`` (turn events) the hot path waited for input with
the worker mostly idle, and faust logged "producer buffer full" hundreds of times a run. Writes here
wait in a list and :meth:`TableStore.flush` hands them straight to the producer, as one record batch per
partition (runtime/batchsend.py); the hot path flushes at the end of each batch, and the consumer flushes every
store before it commits offsets (``DeliveryGuard.before_commit``), as faust flushes its buffer then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from faust.types import TableT

from monitor.runtime.batchsend import BatchingProducer, Record

if TYPE_CHECKING:
    from monitor.runtime.delivery import DeliveryGuard


class Write(NamedTuple):
    key: str
    value: Any  # None: a tombstone
    partition: int
    on_ack: Callable[[], None] | None = None  # put_acked: called once the broker acknowledged it


class TableStore:
    def __init__(self, table: TableT[Any, Any], guard: DeliveryGuard | None = None) -> None:
        self.table = table
        self.guard = guard  # every changelog write's delivery is watched (runtime/delivery.py)
        self._held: list[Write] | None = None
        self._pending: list[Write] = []  # written, not yet handed to the producer (flush)
        self._acks: list[asyncio.Future[Any]] = []  # put_acked records not yet awaited (wait_acked)
        self._flushing = asyncio.Lock()  # one flush at a time: a partition's records keep their order
        self.partitions = cast(int, table.partitions)  # the changelog's (convmon's partition count)
        codec = cast(Any, table)  # faust's tables have these; TableT does not declare them
        self._key_serializer, self._value_serializer = codec.key_serializer, codec.value_serializer
        if guard is not None:
            guard.before_commit(self.flush)

    def hold(self) -> None:
        """Keep changelog writes (not the local data) back until :meth:`release`.

        The hot path holds the sessions' writes until the batch's counts and scores are on the broker:
        a crash in between then restores the sessions as they were before the batch, and the
        re-delivered events close them again (counted once: the dedup marks), instead of meeting
        tombstones of conversations whose counts were lost."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        held, self._held = self._held or [], None
        self._pending.extend(held)

    def _send(self, write: Write) -> None:
        (self._pending if self._held is None else self._held).append(write)

    @property
    def pending(self) -> int:
        """Writes not yet handed to the producer (held ones included)."""
        return len(self._pending) + len(self._held or ())

    async def flush(self) -> int:
        """Hand every released write to the producer, in order, as one record batch per partition (or more
        when they pass the batch size); how many. Each batch's delivery is watched."""
        async with self._flushing:
            pending, self._pending = self._pending, []
            if not pending:
                return 0
            topic = self.table.changelog_topic
            by_partition: dict[int, list[Write]] = {}
            for write in pending:  # an input with more partitions than the changelog shares them (one worker)
                by_partition.setdefault(write.partition % self.partitions, []).append(write)
            producer = cast(BatchingProducer, self.table.app.producer)
            for partition, writes in by_partition.items():
                try:
                    batches = await producer.send_many(topic.get_topic_name(), partition,
                                                       [self._record(topic, w) for w in writes])
                except Exception as exc:  # batches queued before it go unwatched: no offset may commit now
                    if self.guard is not None:
                        self.guard.fail(exc, self._label)
                    raise
                start = 0
                for sent in batches:
                    self._watch(sent.future)
                    for write in writes[start:start + sent.records]:
                        if write.on_ack is not None:
                            self._on_ack(sent.future, write.on_ack)
                    start += sent.records
            return len(pending)

    def _record(self, topic: Any, write: Write) -> Record:
        """Serialized as faust's ``send_changelog`` does: the table's serializers, ``raw`` for a tombstone."""
        key, _ = topic.prepare_key(write.key, self._key_serializer)
        value, headers = topic.prepare_value(write.value, "raw" if write.value is None else self._value_serializer)
        return Record(key, value, headers)

    def _on_ack(self, future: Any, on_ack: Callable[[], None]) -> None:
        def done(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None:
                on_ack()

        future.add_done_callback(done)
        if not self._acks or self._acks[-1] is not future:  # the batch's other records wait on the same one
            self._acks.append(future)

    @property
    def _label(self) -> str:
        """The ``topic`` label of this store's delivery failures."""
        return f"{self.table.name}-changelog"

    def _watch(self, future: object) -> None:
        if self.guard is not None:
            self.guard.watch(future, self._label)

    def get(self, key: str) -> Any:
        return self.table.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        self.table.data[key] = value
        self._send(Write(key, value, partition))

    def put_acked(self, key: str, value: Any, partition: int, on_ack: Callable[[], None]) -> None:
        """``put``, calling ``on_ack`` once the broker acknowledged the changelog record (never on failure)."""
        self.table.data[key] = value
        self._send(Write(key, value, partition, on_ack))

    async def wait_acked(self) -> None:
        """Until every ``put_acked`` record so far is acknowledged (or failed: the delivery guard has it)."""
        await self.flush()
        acks, self._acks = self._acks, []
        if acks:
            await asyncio.gather(*acks, return_exceptions=True)

    def delete(self, key: str, partition: int) -> None:
        self.table.data.pop(key, None)
        self._send(Write(key, None, partition))

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.table.data.items())
