"""Producing to and reading back whole topics, as a black box: for the fault suite's per-id accounting.

Reading never trusts the broker's end offsets: Tansu answers ListOffsets(latest) with the base
offset of the partition's last record batch + 1 (measured: 17 for a partition holding 31 records;
monitor/runtime/log_ends.py), so a tail reads until the broker has nothing more to give, and keeps
its positions between polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

Record = tuple[bytes | None, bytes]  # (key, value)


def produce(bootstrap: str, topic: str, records: Sequence[Record], *, max_request_size: int = 1 << 20) -> None:
    """Send ``records`` in order and wait until the broker acknowledged every one (acks=all)."""

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                    max_request_size=max_request_size, request_timeout_ms=30000)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=key, value=value) for key, value in records]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


def list_topics(bootstrap: str) -> set[str]:
    async def run() -> set[str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        await admin.start()
        try:
            return set(await admin.list_topics())
        finally:
            await admin.close()

    return asyncio.run(run())


class TopicTail:
    """Every record of one topic from the beginning; ``poll()`` returns those not returned before.

    A poll opens its own consumer (no group, no commits) and reads until a fetch comes back empty,
    so it survives a broker restart between polls; while the broker is down it returns nothing.
    """

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.positions: dict[int, int] = {}
        self.records: list[ConsumerRecord] = []
        self.errors = 0

    def poll(self) -> list[ConsumerRecord]:
        try:
            new = asyncio.run(self._poll())
        except Exception:  # broker unreachable (restarting): nothing new this time
            self.errors += 1
            return []
        self.records.extend(new)
        return new

    async def _poll(self) -> list[ConsumerRecord]:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", fetch_max_bytes=16 << 20,
                                    max_partition_fetch_bytes=16 << 20, request_timeout_ms=10000)
        await consumer.start()
        try:
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(self.topic) or set()
            tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
            if not tps:
                return []
            consumer.assign(tps)
            for tp in tps:
                if tp.partition in self.positions:
                    consumer.seek(tp, self.positions[tp.partition])
                else:
                    await consumer.seek_to_beginning(tp)
            out: list[ConsumerRecord] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=300)
                if not batch:
                    break
                for records in batch.values():
                    out.extend(records)
            for tp in tps:
                self.positions[tp.partition] = await consumer.position(tp)
            return out
        finally:
            await consumer.stop()
