"""Producing to and reading back whole topics, as a black box: for the fault suite's per-id accounting.

Reading never trusts the broker's end offsets: Tansu answers ListOffsets(latest) with the base
offset of the partition's last record batch + 1 (measured: 17 for a partition holding 31 records;
monitor/runtime/log_ends.py). Nor does it take an empty fetch for the end: on Tansu's S3 engine
(one S3 object per record batch) a fresh consumer's first fetch answered after 0.5-0.7 s once each
partition held some 50 batches of ~5 records (0.1-0.2 s at 10), so a read that stopped at the first
300 ms without records stopped for good and a fault run's read-back stalled (305 of 2,000
score records once). A read ends where the broker's own fetch responses put the end:
every partition's position at the high watermark its latest fetch reported.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

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


POLL_TIMEOUT_S = 30.0  # one poll's bound; a longer read goes on at the next poll


def reader(bootstrap: str, *, fetch_max_wait_ms: int = 100) -> AIOKafkaConsumer:
    """A consumer of no group for reading whole topics (large fetches; an empty fetch answers within
    ``fetch_max_wait_ms``). Tansu's S3 engine does about that long of a fetch's reading and answers with what it
    has: at 10 % of a CPU, 100 ms answered every fetch empty (0 of 2,000 records in 150 s), 1,000 ms read them
    in 41 s."""
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                            auto_offset_reset="earliest", fetch_max_bytes=16 << 20, max_partition_fetch_bytes=16 << 20,
                            request_timeout_ms=10000, fetch_max_wait_ms=fetch_max_wait_ms)


async def read_to_fetched_end(consumer: AIOKafkaConsumer, tps: Sequence[TopicPartition], *, timeout_s: float,
                              confirm: bool = False, on_first: Callable[[float], None] | None = None,
                              ) -> tuple[list[ConsumerRecord], bool]:
    """The records of the assigned ``tps`` from their positions until each position reached the high watermark
    of the partition's latest fetch response, and whether that happened within ``timeout_s``. With ``confirm``
    a partition is at its end only once a fetch answered *after* it got there still says so. ``on_first`` is
    told how long the first records took (what a fixed wait for "no more records" has to exceed)."""
    out: list[ConsumerRecord] = []
    reached: dict[TopicPartition, float] = {}  # when (ms, the fetcher's clock) a position reached its watermark
    started = time.monotonic()
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        for records in (await consumer.getmany(timeout_ms=200)).values():
            if on_first is not None and not out:
                on_first(time.monotonic() - started)
            out.extend(records)
        now_ms = time.time() * 1000
        done = True
        for tp in tps:
            highwater = consumer.highwater(tp)
            if highwater is None or await consumer.position(tp) < highwater:
                reached.pop(tp, None)
                done = False
                continue
            reached.setdefault(tp, now_ms)
            if confirm and (consumer.last_poll_timestamp(tp) or 0) <= reached[tp]:
                done = False
        if done:
            return out, True
    return out, False


class TopicTail:
    """Every record of one topic from the beginning; ``poll()`` returns those not returned before.

    A poll opens its own consumer (no group, no commits) and reads until every partition reached the
    high watermark of its latest fetch (``read_to_fetched_end``), so it survives a broker restart between
    polls; while the broker is down it returns nothing. ``history`` keeps the polls that read something
    or failed, for the run's table.
    """

    def __init__(self, bootstrap: str, topic: str, *, fetch_max_wait_ms: int = 100) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.positions: dict[int, int] = {}
        self.records: list[ConsumerRecord] = []
        self.errors = 0
        self.unfinished = 0  # polls that hit their deadline before the end (the next poll goes on from there)
        self.history: list[dict[str, object]] = []

    def poll(self) -> list[ConsumerRecord]:
        try:
            new = asyncio.run(self._poll())
        except Exception as e:  # broker unreachable (restarting): nothing new this time
            self.errors += 1
            self.history.append({"t": round(time.time(), 1), "error": type(e).__name__})
            return []
        self.records.extend(new)
        if new:
            self.history.append({"t": round(time.time(), 1), "new": len(new), "positions": dict(self.positions)})
        return new

    async def _poll(self) -> list[ConsumerRecord]:
        consumer = reader(self.bootstrap, fetch_max_wait_ms=self.fetch_max_wait_ms)
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
            out, at_end = await read_to_fetched_end(consumer, tps, timeout_s=POLL_TIMEOUT_S)
            self.unfinished += not at_end
            for tp in tps:
                self.positions[tp.partition] = await consumer.position(tp)
            return out
        finally:
            await consumer.stop()
