"""A re-keyed partition whose last record is older than the one before it, through a real broker and worker.

Re-keyed records keep their input record's timestamp, so a re-keyed partition's timestamps go back and forth
(input partitions are re-keyed batch by batch). Read while the newer record still had a later one behind it,
the partition's clock stopped for good at that record's time: an end without ``turn_count`` waits for its grace
period in that clock, so the conversation stayed open until more input came. In the bombs test
(tests/integration/test_hot_path_attacks.py) that left 3 of its 31 conversations unscored, every input event
counted, in one of eight runs on a loaded machine.
"""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import by_label
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration


def test_an_end_closes_when_its_rekeyed_partition_ends_with_an_older_record(broker: str, make_settings,
                                                                             tmp_path) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=0.0, idle_timeout_s=600.0,
                             allowed_lateness_s=2.0)
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    now_ms = int(time.time() * 1000)
    turn = {"conversation_id": "c", "turn_index": 0, "role": "user", "text": "hello", "timestamp": 1.7e9}
    end = {"type": "end", "conversation_id": "c", "timestamp": 1.7e9 + 1}  # no turn_count: closed by its grace

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker, acks="all")
        await producer.start()
        try:  # both in the log before the worker reads: the turn is read with the end behind it
            for event, age_ms in ((turn, 1_000), (end, 5_000)):
                await producer.send_and_wait(settings.topic("rekeyed"), key=b"c", value=orjson.dumps(event),
                                             timestamp_ms=now_ms - age_ms)
        finally:
            await producer.stop()

    asyncio.run(produce())
    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        wait_until(lambda: by_label(worker.samples(), "convmon_conversations_finished_total", "end_reason")
                   .get("end", 0) >= 1, 60, message="the conversation closed by its end's grace period")
