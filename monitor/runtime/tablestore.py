"""A faust table as a :class:`monitor.stages.sessionize.Store`: every write names its changelog partition,
and a batch's writes go to the producer together, when the checkpoint says (runtime/checkpoint.py).

``table[key] = value`` picks the changelog partition from ``current_event()``; inside a
``take_events`` batch (or a timer) that is not the event whose key is written, so recovery would
restore the key to the wrong worker. Here the caller passes the partition of the key's source
event, using the table's public ``data`` (local store) and changelog topic. An input topic with more
partitions than the changelog writes input partition p to changelog partition p mod n: every value names its
input partition, so a restore keeps what the owner of p owns; that is exact with one worker, and with several
only when the counts match (faust assigns input p and changelog p together then).

faust's own ``send_changelog`` queues each record in its producer buffer, which hands them to the
producer one at a time, several event-loop turns each, and while more than 100 wait it stops
delivering input to every stream (``wait_until_ebb``). With one changelog record per turn event that
buffer set the worker's pace: in ``bench throughput`` (turn events) the hot path waited for input with
the worker mostly idle, and faust logged "producer buffer full" hundreds of times a run. Writes here
wait in a list until :meth:`TableStore.flush` hands them straight to the producer, as one record batch per
partition (runtime/batchsend.py). Only the checkpoint flushes the worker's stores: the sessions' writes of a
hot-path batch wait there until the batch's outputs and counts are on the broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, NamedTuple, cast

from faust.serializers.codecs import get_codec
from faust.types import TableT

from monitor.runtime.batchsend import BatchingProducer, Record


class Write(NamedTuple):
    key: str
    value: Any  # None: a tombstone
    partition: int


class TableStore:
    def __init__(self, table: TableT[Any, Any]) -> None:
        self.table = table
        self._pending: list[Write] = []  # written, not yet handed to the producer (flush)
        self._flushing = asyncio.Lock()  # one flush at a time: a partition's records keep their order
        self.partitions = cast(int, table.partitions)  # the changelog's (convmon's partition count)
        codec = cast(Any, table)  # faust's tables have these; TableT does not declare them
        # The table's own codecs: faust's topic/schema layers around them cost more than the JSON (a record a turn)
        self._key_codec, self._value_codec = get_codec(codec.key_serializer), get_codec(codec.value_serializer)

    @property
    def pending(self) -> int:
        """Writes not yet handed to the producer."""
        return len(self._pending)

    @property
    def label(self) -> str:
        """The ``topic`` label of this store's delivery failures."""
        return f"{self.table.name}-changelog"

    async def flush(self) -> list[asyncio.Future[Any]]:
        """Hand every write to the producer, in order, as one record batch per partition (or more when they pass
        the batch size); the batches' delivery futures. A send that raises leaves the batches before it queued."""
        async with self._flushing:
            pending, self._pending = self._pending, []
            topic = self.table.changelog_topic
            by_partition: dict[int, list[Write]] = {}
            for write in pending:  # an input with more partitions than the changelog shares them (one worker)
                by_partition.setdefault(write.partition % self.partitions, []).append(write)
            producer = cast(BatchingProducer, self.table.app.producer)
            futures = []
            for partition, writes in by_partition.items():
                sent = await producer.send_many(topic.get_topic_name(), partition,
                                                [self._record(w) for w in writes])
                futures += [batch.future for batch in sent]
            return futures

    def _record(self, write: Write) -> Record:
        """Serialized as faust's ``send_changelog`` does (the table's codecs; a tombstone has no value), without
        its per-record schema layers: the same bytes (tests/runtime/test_tablestore.py), no headers."""
        return Record(self._key_codec.dumps(write.key),
                      None if write.value is None else self._value_codec.dumps(write.value), None)

    def get(self, key: str) -> Any:
        return self.table.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        self.table.data[key] = value
        self._pending.append(Write(key, value, partition))

    def delete(self, key: str, partition: int) -> None:
        self.table.data.pop(key, None)
        self._pending.append(Write(key, None, partition))

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.table.data.items())
