"""Many records to one partition as Kafka record batches, one delivery future per batch.

faust's ``Producer.send`` takes one record: aiokafka then looks the topic's partitions up twice,
appends the record to the partition's open batch and gives it a future of its own, which the
producer's sender resolves and whose callbacks the loop runs one by one. The hot path writes one
changelog record per turn event, and in ``bench throughput`` (turn events) that per-record work was
about a sixth of a worker's CPU. :meth:`BatchingProducer.send_many` builds aiokafka record batches
(its public ``create_batch`` / ``send_batch``) instead: one partition lookup and one future per batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from faust.transport.drivers import aiokafka as faust_aiokafka

FEW = 16  # fewer records than this go one by one (see send_many)


class Record(NamedTuple):
    key: bytes | None
    value: bytes | None  # None: a tombstone
    headers: Sequence[tuple[str, bytes]] | Mapping[str, bytes] | None = None


class Sent(NamedTuple):
    future: asyncio.Future[Any]  # resolved once the broker acknowledged the whole batch
    records: int  # how many of the records given, in order, the batch holds


class BatchingProducer(faust_aiokafka.Producer):
    """faust's aiokafka producer that can also send a partition's records as batches."""

    async def send_many(self, topic: str, partition: int, records: Sequence[Record]) -> list[Sent]:
        """Send ``records`` in order to ``partition`` of ``topic``; the batches, in order. A batch is closed
        when the producer's ``max_batch_size`` is reached (a record larger than that goes alone).

        aiokafka's ``send_batch`` first waits until the partition's previous batch has left for the broker
        (a linger and, while one request is in flight, its round trip). That is nothing beside a hot-path
        batch of hundreds of writes, but the judge agent flushes one or two after every record: fewer than
        ``FEW`` records are appended one by one to the partition's open batch instead, which does not wait."""
        producer = self._ensure_producer()
        sent: list[Sent] = []
        if len(records) < FEW:  # appended to the partition's open batch: aiokafka's send_batch would wait first
            for record in records:
                future = await producer.send(topic, record.value, key=record.key, partition=partition,
                                             headers=self._headers(record.headers))
                sent.append(Sent(future, 1))
            return sent
        batch, n = producer.create_batch(), 0
        for record in records:
            headers = self._headers(record.headers)
            if batch.append(key=record.key, value=record.value, timestamp=None, headers=headers) is None:  # full
                sent.append(Sent(await producer.send_batch(batch, topic, partition=partition), n))
                batch, n = producer.create_batch(), 0
                batch.append(key=record.key, value=record.value, timestamp=None, headers=headers)  # first fits
            n += 1
        if n:
            sent.append(Sent(await producer.send_batch(batch, topic, partition=partition), n))
        return sent

    def _headers(self, headers: Sequence[tuple[str, bytes]] | Mapping[str, bytes] | None) -> list[tuple[str, bytes]]:
        """As faust's ``send``: a mapping becomes pairs, and no headers where the broker takes none."""
        if not headers or not self.allow_headers:
            return []
        return list(headers.items()) if isinstance(headers, Mapping) else list(headers)
