"""A table restore reads to where the log really ends (runtime/log_ends.py), on the embedded broker.

The broker is sent 5 records in one batch and 3 in another; its ListOffsets answer may stop inside the
last batch (the embedded Tansu build says 6), which made a restarted worker restore a prefix of the dead
worker's last hot-path batch and lose its counts. The end used for a restore must be 8.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from faust.types import TP

from monitor.contracts.settings import Settings
from monitor.runtime.app import create_app
from monitor.runtime.broker import ensure_topics
from monitor.runtime.delivery import GuardedConsumer
from monitor.runtime.layout import read_layout
from monitor.runtime.log_ends import EndCheckingConsumer, checked_ends, fetched_ends, stop_probe
from monitor.runtime.topics import create_topics

pytestmark = pytest.mark.integration


async def two_batches(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    await producer.start()
    try:
        for size in (5, 3):  # sent together, each group lands as one record batch
            await asyncio.gather(*[await producer.send(topic, b"v", key=b"k", partition=0) for _ in range(size)])
    finally:
        await producer.stop()


def test_the_restore_end_is_the_fetched_high_watermark_not_a_short_listoffsets_answer(broker: str) -> None:
    topic = f"ends-{uuid.uuid4().hex[:8]}"
    tp = TP(topic, 0)

    async def run() -> tuple[int | None, int | None, int | None, dict[TP, int | None]]:
        await ensure_topics(broker, [topic, f"{topic}-empty"], 1)
        await two_batches(broker, topic)
        consumer = AIOKafkaConsumer(bootstrap_servers=broker, group_id=None, enable_auto_commit=False,
                                    fetch_max_wait_ms=100)
        await consumer.start()
        empty = TP(f"{topic}-empty", 0)
        try:
            listed = (await consumer.end_offsets([TopicPartition(topic, 0)]))[TopicPartition(topic, 0)]
            ends = await fetched_ends(consumer, {tp: listed, empty: 0})
        finally:
            await consumer.stop()
        # what the worker's consumer does: the same check from a client of its own
        checked = await checked_ends({tp: listed, empty: 0, TP(topic, 1): None}, bootstrap_servers=broker)
        return listed, ends[tp], ends[empty], checked

    listed, end, empty_end, checked = asyncio.run(run())
    assert end == 8, f"the restore would stop at {end} (ListOffsets said {listed})"
    assert empty_end == 0
    assert listed is not None and listed <= end
    assert checked == {tp: 8, TP(f"{topic}-empty", 0): 0, TP(topic, 1): None}


def test_a_member_with_no_changelog_partition_checks_without_a_client() -> None:
    """An idle member's rebalance lists no end: nothing to fetch, so no client (this address has no broker)."""
    nowhere = "127.0.0.1:9"
    assert asyncio.run(checked_ends({}, bootstrap_servers=nowhere)) == {}
    assert asyncio.run(checked_ends({TP("t", 0): None}, bootstrap_servers=nowhere)) == {TP("t", 0): None}


def test_a_probe_client_stopped_right_after_start_does_not_raise(broker: str) -> None:
    """aiokafka's stop() straight after start() raised CancelledError (aio-libs/aiokafka#647); inside faust's
    recovery task that ended recovery for good and left an idle member unready (#18)."""

    async def run() -> None:
        for _ in range(3):
            consumer = AIOKafkaConsumer(bootstrap_servers=broker, group_id=None, enable_auto_commit=False)
            await consumer.start()
            await stop_probe(consumer)

    asyncio.run(run())


def test_the_worker_consumer_checks_its_restore_ends_against_tansu_only(make_settings) -> None:
    settings: Settings = make_settings()
    app, _ = create_app(settings, tansu=True)
    assert issubclass(app.transport.Consumer, EndCheckingConsumer)
    assert issubclass(app.transport.Consumer, GuardedConsumer)  # and still guards its commits
    app, _ = create_app(settings)
    assert not issubclass(app.transport.Consumer, EndCheckingConsumer)
    assert issubclass(app.transport.Consumer, GuardedConsumer)


@pytest.mark.integration
def test_the_embedded_broker_is_told_by_its_cluster_id(broker: str, make_settings) -> None:
    """`convmon broker` and the fixtures run Tansu with its default cluster id: the worker loads its workarounds."""
    settings: Settings = make_settings(broker_url=f"kafka://{broker}")
    asyncio.run(create_topics(settings))
    assert asyncio.run(read_layout(settings)).tansu
