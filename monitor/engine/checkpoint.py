"""The checkpoint: the one place that decides when input offsets commit (quix-streams' ``Checkpoint`` is the model).

Per batch, in this order: the batch's outputs are produced; the state changes go to the changelog, each record
headed by its writer and the offsets about to be committed for its partition (engine/changelog.py); the producer is
flushed and every delivery must be acknowledged, else the worker stops without committing (its successor re-reads
from the last commit); the input offsets are committed explicitly; only then are the batch's totals exported, so a
scrape never sees a count its partition's next owner would not restore.

The offsets, not a sequence number in the commit's metadata, say which changelog records are committed: the
development broker (Tansu) does not keep commit metadata.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import CommitFailedError

from monitor.contracts.metrics import Metrics
from monitor.engine.changelog import Write, encode_value, record_headers
from monitor.stages.deadletter import DeadLetter
from monitor.stages.scoring import Delivery
from monitor.stages.sends import Send

log = logging.getLogger(__name__)


class DeliveryFailed(Exception):
    """A record was not acknowledged by the broker: nothing more may commit."""


class CommitFailed(Exception):
    """The offset commit failed: the partitions' in-memory state no longer matches what is committed."""


class CommitRefused(CommitFailed):
    """The group refused the commit (it no longer knows this member or its generation, or it is rebalancing):
    another member may own the partitions now. aiokafka has asked to rejoin the group before it raised."""


async def send_records(producer: AIOKafkaProducer, topic: str, sends: Sequence[Send],
                       partitions: int) -> list[asyncio.Future[Any]]:
    """Hand ``sends`` to the producer; their delivery futures. A record naming its partition goes to it modulo
    ``partitions`` (convmon's count)."""
    out = []
    for s in sends:
        partition = None if s.partition is None else s.partition % partitions
        timestamp = None if s.timestamp is None else int(s.timestamp * 1000)
        out.append(await producer.send(topic, value=s.value, key=s.key, partition=partition, timestamp_ms=timestamp,
                                       headers=s.headers))
    return out


async def send_batched(producer: AIOKafkaProducer, topic: str, partition: int,
                       records: Sequence[tuple[bytes, bytes | None]],
                       headers: list[tuple[str, bytes]]) -> list[asyncio.Future[Any]]:
    """``records`` (key, value) in order to one partition as record batches, all with ``headers``; their delivery
    futures (one per batch: a batch is acknowledged, or refused, whole)."""
    out = []
    batch = producer.create_batch()
    for key, value in records:
        if batch.append(timestamp=None, key=key, value=value, headers=headers) is None:  # full: the next one
            out.append(await producer.send_batch(batch, topic, partition=partition))
            batch = producer.create_batch()
            if batch.append(timestamp=None, key=key, value=value, headers=headers) is None:
                raise ValueError(f"a changelog record of {len(key) + len(value or b'')} bytes fits no batch")
    if batch.record_count():
        out.append(await producer.send_batch(batch, topic, partition=partition))
    return out


class TopicSender:
    """One topic on the engine's producer, as the dead-letter sender expects (``send(key=, value=, headers=)``)."""

    def __init__(self, producer: AIOKafkaProducer, topic: str) -> None:
        self.producer, self.topic = producer, topic

    async def send(self, *, key: bytes | None, value: bytes | None, headers: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = await self.producer.send(self.topic, value=value, key=key,
                                                               headers=list(headers or []))
        return future


class Checkpoint:
    def __init__(self, producer: AIOKafkaProducer, consumer: AIOKafkaConsumer, metrics: Metrics, *,
                 topics: Mapping[str, str], changelog: str, partitions: int, pending: list[Write],
                 state_topics: frozenset[str],
                 send_dead: Callable[[DeadLetter], Any], export: Callable[[], Callable[[], None]]) -> None:
        self.producer, self.consumer, self.metrics = producer, consumer, metrics
        self.topics = topics  # delivery field -> topic name: rekey, judge, scores, labels
        self.changelog = changelog
        self.partitions = partitions  # convmon's: a record naming its partition goes to it modulo this
        self.pending = pending  # the stores' writes since the last checkpoint (engine/changelog.py)
        # the topics whose offsets say whether a changelog record is committed: the re-keyed and verdicts topics,
        # and the input where it is read in place (an input of another partition count is only forwarded)
        self.state_topics = state_topics
        self.send_dead = send_dead  # returns the letter's delivery future (runtime DeadLetters.send_letter)
        self.export = export  # PartitionTotals.written: what it returns exports the batches committed so far
        self.writers: dict[int, bytes] = {}  # state partition -> the writer id of its restore
        metrics.commits_blocked.set(0)

    async def commit(self, delivery: Delivery, offsets: Mapping[TopicPartition, int]) -> None:
        """Produce, log, flush, check, commit, export. Raises DeliveryFailed, CommitRefused or CommitFailed."""
        futures = await self.produce(delivery)
        futures += await self.log_state(offsets)
        exported = self.export()
        await self.flush(futures)
        await self.commit_offsets(offsets)
        exported()

    async def produce(self, delivery: Delivery) -> list[tuple[str, asyncio.Future[Any]]]:
        futures: list[tuple[str, asyncio.Future[Any]]] = []
        for field in ("rekey", "judge", "scores", "labels"):
            futures += await self._send(self.topics[field], getattr(delivery, field))
        for letter in delivery.dead:
            futures.append(("dead-letters", await self.send_dead(letter)))
        return futures

    async def flush(self, futures: list[tuple[str, asyncio.Future[Any]]]) -> None:
        """Every record sent so far on the broker, or DeliveryFailed."""
        await self.producer.flush()
        if futures:
            await asyncio.wait([f for _, f in futures])
        for topic, future in futures:
            error = future.exception() if future.done() and not future.cancelled() else None
            if not future.done() or future.cancelled() or error is not None:
                self.metrics.delivery_failures.labels(topic).inc()
                self.metrics.commits_blocked.set(1)
                raise DeliveryFailed(f"a record to {topic} was not delivered: "
                                     f"{type(error).__name__ if error else 'cancelled'}")

    async def _send(self, topic: str, sends: Sequence[Send]) -> list[tuple[str, asyncio.Future[Any]]]:
        return [(topic, f) for f in await send_records(self.producer, topic, sends, self.partitions)]

    def forget(self, partitions: set[int]) -> None:
        """Partitions this worker no longer writes: their unsent state changes and writer ids go."""
        self.pending[:] = [w for w in self.pending if w.partition % self.partitions not in partitions]
        for p in partitions:
            self.writers.pop(p, None)

    async def log_state(self, offsets: Mapping[TopicPartition, int]) -> list[tuple[str, asyncio.Future[Any]]]:
        """The pending state changes, in order, one record each, sent as one record batch per partition (a
        record's own send costs more than encoding it; on turn events a conversation is about 28 records)."""
        writes, self.pending[:] = list(self.pending), []
        by_partition: dict[int, dict[str, int]] = {}
        for tp, offset in offsets.items():
            if tp.topic in self.state_topics:
                by_partition.setdefault(tp.partition, {})[tp.topic] = offset
        records: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for w in writes:
            records.setdefault(w.partition % self.partitions, []).append((w.key, encode_value(w.value)))
        out = []
        for partition, batch in records.items():
            headers = record_headers(self.writers.get(partition, b""), by_partition.get(partition, {}))
            out += [(self.changelog, f) for f in await send_batched(self.producer, self.changelog, partition,
                                                                    batch, headers)]
        return out

    async def restate(self, partition: int, writer: bytes, values: Mapping[bytes, Any],
                      committed: Mapping[str, int]) -> None:
        """Log ``values`` (changelog key -> value, None a tombstone) for ``partition`` now, as committed state."""
        records = [(k, encode_value(v)) for k, v in values.items()]
        futures = await send_batched(self.producer, self.changelog, partition, records,
                                     record_headers(writer, committed))
        await self.flush([("changelog", f) for f in futures])

    async def commit_offsets(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        try:
            await self.consumer.commit(dict(offsets))
        except CommitFailedError as exc:
            raise CommitRefused(f"the group refused the offset commit: {type(exc.__cause__).__name__}") from exc
        except Exception as exc:
            raise CommitFailed(f"offset commit failed: {type(exc).__name__}: {exc}") from exc
