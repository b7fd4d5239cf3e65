"""Producing events to the input topic: shared by the simulator, replay and benchmarks."""

from __future__ import annotations

from typing import Any

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from monitor.contracts.settings import Settings
from monitor.runtime.app import aiokafka_kwargs, bootstrap, broker_unreachable


def make_producer(settings: Settings, **overrides: Any) -> AIOKafkaProducer:
    kwargs: dict[str, Any] = {"linger_ms": 5, "acks": "all", **aiokafka_kwargs(settings), **overrides}
    return AIOKafkaProducer(bootstrap_servers=bootstrap(settings), **kwargs)


async def start_producer(settings: Settings, producer: AIOKafkaProducer) -> None:
    """Start ``producer``; an unreachable broker is one ConfigError line naming CONVMON_BROKER_URL."""
    try:
        await producer.start()
    except KafkaError as exc:
        await producer.stop()
        raise broker_unreachable(settings, exc) from exc


async def send_event(producer: AIOKafkaProducer, topic: str, event: dict[str, Any]) -> None:
    """Key by conversation id so one partition (one sessionizer) owns each conversation."""
    await producer.send(topic, key=str(event["conversation_id"]).encode(), value=orjson.dumps(event))


async def produce_events(settings: Settings, events: list[dict[str, Any]]) -> None:
    """Send events in order to the input topic and wait until the broker has them all."""
    producer = make_producer(settings)
    await start_producer(settings, producer)
    try:
        for event in events:
            await send_event(producer, settings.topic("events"), event)
        await producer.flush()
    finally:
        await producer.stop()
