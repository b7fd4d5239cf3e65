"""Simulated conversations produced to a real broker, and a topic read back whole, for the end-to-end tests."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.runtime.produce import make_producer, send_event
from monitor.runtime.scrape import by_label
from monitor.tools.simulator.generate import ConversationGenerator, SimConversation
from tests.support.workers import WorkerProcess

Samples = list[tuple[str, dict[str, str], float]]


def conversations(settings: Settings, prefix: str, n: int, seed: int = 0) -> list[SimConversation]:
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    generator = ConversationGenerator(rubric, seed=seed)
    return [generator.generate(f"{prefix}-{i}", time.time()) for i in range(n)]


def produce(settings: Settings, convs: list[SimConversation], pace_s: float = 0.0) -> None:
    """Each conversation's events in order, conversations one after another (``pace_s`` apart)."""

    async def run() -> None:
        producer = make_producer(settings)
        await producer.start()
        try:
            for conv in convs:
                for event in conv.events:
                    await send_event(producer, settings.topic("events"), event)
                if pace_s:
                    await producer.flush()
                    await asyncio.sleep(pace_s)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(run())


def read_topic(bootstrap: str, topic: str) -> list[Any]:
    """Every record currently in ``topic``, from the beginning to the end offsets."""

    async def run() -> list[Any]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            partitions = consumer.partitions_for_topic(topic)
            if partitions is None:
                await consumer._client.force_metadata_update()
                partitions = consumer.partitions_for_topic(topic) or set()
            tps = [TopicPartition(topic, p) for p in sorted(partitions)]
            if not tps:
                return []
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            out: list[Any] = []
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                behind = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
                if not behind:
                    break
                for records in (await consumer.getmany(*behind, timeout_ms=500)).values():
                    out.extend(records)
                # a fetch's high watermark, not ListOffsets, is where Tansu's log ends (monitor/runtime/log_ends.py)
                ends = {tp: max(end, consumer.highwater(tp) or 0) for tp, end in ends.items()}
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


def scored(samples: Samples) -> dict[str, float]:
    return by_label(samples, "convmon_conversations_scored_total", "scorer")


def no_crash(worker: WorkerProcess) -> None:
    """Faust logs "Crashed reason=..." when an agent or timer dies (the worker then stops or limps on)."""
    assert "Crashed reason" not in worker.log_path.read_text(errors="replace"), worker.log()
