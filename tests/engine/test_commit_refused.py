"""What the writer relies on when the group refuses a commit, on the real broker: the checkpoint says CommitRefused
(not another CommitFailed), and aiokafka rejoins by itself, so the listener sees a revocation and then a new
assignment in a new generation without the writer asking. A commit error that is not the group's refusal is a
plain CommitFailed (the worker stops)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.engine.checkpoint import Checkpoint, CommitFailed, CommitRefused
from monitor.runtime.broker import ensure_topics

pytestmark = pytest.mark.integration


class Calls(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.calls.append(("revoked", frozenset(revoked)))

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.calls.append(("assigned", frozenset(assigned)))


async def refused_then_rejoined(bootstrap: str) -> None:
    topic, group = f"refused-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    await ensure_topics(bootstrap, [topic], 2)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    for i in range(4):
        await producer.send_and_wait(topic, b"x", partition=i % 2)
    await producer.stop()
    listener = Calls()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500)
    consumer.subscribe([topic], listener=listener)
    await consumer.start()
    try:
        checkpoint = Checkpoint(None, consumer,  # no producer: it only commits here
                                Metrics(CollectorRegistry()), topics={}, changelog="", partitions=2,
                                pending=[], state_topics=frozenset(), send_dead=lambda _: None,
                                export=lambda: lambda: None)
        while not consumer.assignment():
            await consumer.getmany(timeout_ms=200)
        tps = frozenset(consumer.assignment())
        await checkpoint.commit_offsets({tp: 1 for tp in tps})
        coordinator = consumer._coordinator
        generation, before = coordinator.generation, len(listener.calls)
        coordinator.generation += 100  # the group moved on without this member
        with pytest.raises(CommitRefused, match="IllegalGenerationError"):
            await checkpoint.commit_offsets({tp: 2 for tp in tps})
        for _ in range(100):  # the writer keeps fetching (paused): nothing else is asked of the consumer
            if listener.calls[-1:] == [("assigned", tps)]:
                break
            await consumer.getmany(timeout_ms=100)
        assert listener.calls[before:] == [("revoked", tps), ("assigned", tps)]
        assert coordinator.generation not in (generation, generation + 100)
        await checkpoint.commit_offsets({tp: 2 for tp in tps})  # the new generation commits
        with pytest.raises(CommitFailed) as failed:  # a partition this member was not assigned
            await checkpoint.commit_offsets({TopicPartition(topic, 7): 1})
        assert not isinstance(failed.value, CommitRefused)
    finally:
        await consumer.stop()


def test_a_refused_commit_is_told_apart_and_the_consumer_rejoins_by_itself(broker: str) -> None:
    asyncio.run(refused_then_rejoined(broker))
