"""Human labels from a Kafka topic of feedback (``convmon labels consume --topic T``).

Each message is one JSON label as ``convmon labels import`` reads it (``conversation_id``, ``item_id`` or
``overall``, ``answer``, ...; ``source`` is ``feedback``). A consumer group (``<app_id>-human-labels``) reads the
topic; a batch is committed only once its labels are stored, and a message that is not a label goes to the
dead-letter topic with its reason (``label_rejected``, stage ``human_labels``), so nothing is lost or blocks.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from distill.human_labels import HumanLabel, HumanLabelStore, label_from
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.sections import KafkaSettings
from monitor.runtime.clients import aiokafka_kwargs, bootstrap, broker_unreachable
from monitor.stages.deadletter import dead_letter


@dataclass
class Consumed:
    stored: int = 0
    rejected: int = 0


def parse(raw: bytes, rubric: RubricSet) -> HumanLabel:
    """One message as a human label; ValueError naming the field otherwise."""
    try:
        value: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    return label_from(value, rubric, source="feedback")


async def consume(kafka: KafkaSettings, topic: str, store: HumanLabelStore, rubric: RubricSet, *,
                  max_request_bytes: int, until_end: bool = False) -> Consumed:
    """Store the topic's labels until stopped (or, with ``until_end``, until caught up with its end)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap(kafka), group_id=f"{kafka.app_id}-human-labels",
                                enable_auto_commit=False, auto_offset_reset="earliest", **aiokafka_kwargs(kafka))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap(kafka), **aiokafka_kwargs(kafka))
    try:
        await consumer.start()
        await producer.start()
    except KafkaError as exc:
        await consumer.stop()
        await producer.stop()
        raise broker_unreachable(kafka, exc) from exc
    done = Consumed()
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=500, max_records=1000)
            labels, letters = [], []
            for records in batches.values():
                for record in records:
                    try:
                        labels.append(parse(record.value or b"", rubric))
                    except ValueError as exc:
                        letters.append(dead_letter(record.value, record.key, reason="label_rejected",
                                                   detail=str(exc), stage="human_labels",
                                                   max_bytes=max_request_bytes))
            if labels:
                await asyncio.get_running_loop().run_in_executor(None, store.upsert, labels)
            for letter in letters:
                await producer.send_and_wait(kafka.topic("dead-letters"), letter.value, key=letter.key,
                                             headers=letter.headers)
            if batches:
                await consumer.commit()
            done.stored += len(labels)
            done.rejected += len(letters)
            if until_end and not batches and await _caught_up(consumer):
                return done
    finally:
        await consumer.stop()
        await producer.stop()


async def _caught_up(consumer: AIOKafkaConsumer) -> bool:
    assigned: set[TopicPartition] = consumer.assignment()
    if not assigned:
        return False
    ends = await consumer.end_offsets(list(assigned))
    for tp in assigned:
        if await consumer.position(tp) < ends[tp]:
            return False
    return True
