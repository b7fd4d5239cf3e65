"""Producing events to the input topic: shared by the simulator, replay and benchmarks."""

from __future__ import annotations

from typing import Any

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from monitor.contracts.settings import KafkaSettings
from monitor.runtime.clients import aiokafka_kwargs, bootstrap, broker_unreachable


def make_producer(kafka: KafkaSettings, **overrides: Any) -> AIOKafkaProducer:
    kwargs: dict[str, Any] = {"linger_ms": 5, "acks": "all", **aiokafka_kwargs(kafka), **overrides}
    return AIOKafkaProducer(bootstrap_servers=bootstrap(kafka), **kwargs)


async def start_producer(kafka: KafkaSettings, producer: AIOKafkaProducer) -> None:
    """Start ``producer``; an unreachable broker is one ConfigError line naming CONVMON_BROKER_URL."""
    try:
        await producer.start()
    except KafkaError as exc:
        await producer.stop()
        raise broker_unreachable(kafka, exc) from exc


async def send_event(producer: AIOKafkaProducer, topic: str, event: dict[str, Any]) -> None:
    """Key by conversation id so one partition (one sessionizer) owns each conversation."""
    await producer.send(topic, key=str(event["conversation_id"]).encode(), value=orjson.dumps(event))


async def produce_events(kafka: KafkaSettings, events: list[dict[str, Any]]) -> None:
    """Send events in order to the input topic and wait until the broker has them all."""
    producer = make_producer(kafka)
    await start_producer(kafka, producer)
    try:
        for event in events:
            await send_event(producer, kafka.input_topic_name, event)
        await producer.flush()
    finally:
        await producer.stop()
