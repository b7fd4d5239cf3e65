"""Partition state kept in memory and logged to one compacted changelog topic; its restore after a crash.

Every write names its state partition (the re-keyed topic's partition: the conversation's). Writes wait in a
list until the checkpoint sends them (engine/checkpoint.py), each record headed by the writer that made it and the
offsets the checkpoint then commits for the partition's topics (input, re-keyed, verdicts). Every state change comes
from a record of its partition (idle sweeps too: the writer sends its partitions a tick through the re-keyed topic),
so a changelog record belongs to committed input exactly when the group's committed offsets reached the ones it
carries, and restore needs no commit records, before-images or rollback:

1. the new owner appends a *fence* (its writer id) to the partition;
2. it replays the partition up to the fence. A record counts when the committed offsets reached those it carries,
   and, after any fence, only the records of that fence's writer count (an owner expelled from the group may
   still append for a while: its commits fail, its records are skipped);
3. every key whose newest record was skipped is written again with the value restored (before the partition is
   read), so compaction can never keep a skipped value.

Reading to the fence also sidesteps brokers whose ListOffsets answer lags the log (the development broker's).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

WRITER = "convmon-writer"  # header: the writer (one id per restore of a partition) that made the record
OFFSETS = "convmon-offsets"  # header: {topic: next offset} of the partition, as its checkpoint commits them
FENCE = b"#fence|"  # key prefix of a fence record (+ its writer, also its value: compaction keeps every fence)
STORES = (b"S", b"C")  # key prefixes: the sessions store, the counts store (dedup marks and totals)


class RestoreTimeout(Exception):
    """The changelog could not be read up to the fence in time: the partition is not taken."""


class Write(NamedTuple):
    key: bytes  # the changelog key: store prefix + store key
    value: Any  # None: a tombstone
    partition: int


class PartitionStore:
    """One store (sessions, or counts) of every owned partition, as :class:`monitor.stages.sessionize.Store`."""

    def __init__(self, prefix: bytes, pending: list[Write]) -> None:
        self.prefix = prefix
        self.pending = pending  # shared by the stores of one engine: the checkpoint sends them in order
        self.data: dict[str, Any] = {}
        self.partition_of: dict[str, int] = {}

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        self.data[key] = value
        self.partition_of[key] = partition
        self.pending.append(Write(self.prefix + key.encode(), value, partition))

    def delete(self, key: str, partition: int) -> None:
        self.data.pop(key, None)
        self.partition_of.pop(key, None)
        self.pending.append(Write(self.prefix + key.encode(), None, partition))

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.data.items())

    def load(self, key: str, value: Any, partition: int) -> None:
        """A restored value: kept, not logged again."""
        self.data[key] = value
        self.partition_of[key] = partition

    def drop(self, partitions: set[int]) -> None:
        """Forget the partitions this worker no longer owns (their next owner restores them)."""
        for key in [k for k, p in self.partition_of.items() if p in partitions]:
            del self.data[key], self.partition_of[key]


@dataclass
class Restored:
    values: dict[bytes, Any] = field(default_factory=dict)  # changelog key -> value (tombstones removed)
    rewrite: dict[bytes, Any] = field(default_factory=dict)  # keys whose newest record was skipped -> value
    records: int = 0
    skipped: int = 0


def replay(records: Iterable[tuple[bytes, bytes | None, dict[str, bytes]]], committed: Mapping[str, int]) -> Restored:
    """The committed state of one partition from its changelog records, in log order (see the module doc)."""
    out = Restored()
    writer: bytes | None = None  # the last fence's writer: only its records count after it
    newest_skipped: dict[bytes, bool] = {}
    for key, value, headers in records:
        if key.startswith(FENCE):
            writer = value
            continue
        out.records += 1
        if not _within(headers.get(OFFSETS), committed) or (writer is not None and headers.get(WRITER) != writer):
            out.skipped += 1
            newest_skipped[key] = True
            continue
        newest_skipped[key] = False
        if value is None:
            out.values.pop(key, None)
        else:
            out.values[key] = orjson.loads(value)
    out.rewrite = {k: out.values.get(k) for k, skipped in newest_skipped.items() if skipped}
    return out


def _within(carried: bytes | None, committed: Mapping[str, int]) -> bool:
    """Whether the group committed at least the offsets a record carries ({topic: next offset})."""
    offsets = orjson.loads(carried) if carried else {}
    return all(committed.get(topic, -1) >= offset for topic, offset in offsets.items())


def encode_value(value: Any) -> bytes | None:
    return None if value is None else orjson.dumps(value)


def record_headers(writer: bytes, offsets: Mapping[str, int]) -> list[tuple[str, bytes]]:
    return [(WRITER, writer), (OFFSETS, orjson.dumps(dict(offsets)))]


def new_writer() -> bytes:
    return uuid.uuid4().hex.encode()


async def restore(producer: AIOKafkaProducer, consumer: AIOKafkaConsumer, topic: str, partition: int,
                  committed: Mapping[str, int], writer: bytes, *, timeout_s: float) -> Restored:
    """Fence the partition for ``writer``, then replay it up to the fence. ``consumer`` has no group."""
    await producer.send_and_wait(topic, key=FENCE + writer, value=writer, partition=partition)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    await consumer.seek_to_beginning(tp)
    records: list[tuple[bytes, bytes | None, dict[str, bytes]]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise RestoreTimeout(f"{topic}[{partition}] not read up to its fence within {timeout_s:g}s")
        batch = await consumer.getmany(tp, timeout_ms=int(min(left, 1.0) * 1000))
        done = False
        for message in batch.get(tp, []):
            if message.key == FENCE + writer:  # the record itself: no listed end is trusted
                done = True
                break
            records.append((message.key or b"", message.value, {k: bytes(v) for k, v in message.headers}))
        if done:
            break
    consumer.unsubscribe()
    return replay(records, committed)
