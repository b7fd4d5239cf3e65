"""A partition's records sent as record batches reach the broker in order, tombstones and headers intact, split
where they pass the batch size, and a few records one by one (runtime/batchsend.py), on the embedded broker."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from monitor.runtime.app import create_app
from monitor.runtime.batchsend import BatchingProducer, Record
from monitor.runtime.broker import ensure_topics

pytestmark = pytest.mark.integration


def test_send_many_keeps_order_tombstones_headers_and_splits_at_the_batch_size(broker: str, make_settings) -> None:
    topic = f"batches-{uuid.uuid4().hex[:8]}"
    big = b"x" * 300_000  # 3 fit the 1 MiB batch size: 7 of them take 3 batches
    records = ([Record(f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())]) for i in range(200)]
               + [Record(b"k3", None)]  # a tombstone
               + [Record(f"big{i}".encode(), big, {"h": b"big"}) for i in range(7)])

    async def run() -> tuple[list[int], list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]]:
        await ensure_topics(broker, [topic], 2)
        app, _ = create_app(make_settings(broker_url=f"kafka://{broker}"))
        producer = app.producer
        assert isinstance(producer, BatchingProducer)
        await producer.start()
        try:
            few = await producer.send_many(topic, 1, records[:3])  # appended one by one
            sent = await producer.send_many(topic, 1, records[3:])
            await asyncio.gather(*[s.future for s in few + sent])
            assert [s.records for s in few] == [1, 1, 1]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker, group_id=None, auto_offset_reset="earliest")
        await consumer.start()
        got: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
        try:
            consumer.assign([TopicPartition(topic, 1)])
            while len(got) < len(records):
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                got += [(m.key, m.value, list(m.headers)) for ms in batch.values() for m in ms]
        finally:
            await consumer.stop()
        return [s.records for s in sent], got

    sizes, got = asyncio.run(run())
    assert sum(sizes) == len(records) - 3 and len(sizes) >= 3  # the big records did not fit one batch
    assert [(k, v) for k, v, _ in got] == [(r.key, r.value) for r in records]
    assert got[5][2] == [("h", b"5")] and got[200][1] is None and got[-1][2] == [("h", b"big")]
