"""`convmon dead-letters tail | summary`: what the dead-letter topic holds, from its headers.

The precise reason of a dead letter lives in its headers (``convmon-reason``, ``convmon-field``,
``convmon-detail``, ``convmon-stage``: monitor/stages/deadletter.py); the worker's log names only the
reason, the field and an opaque reference. These commands read ``<prefix>dead-letters`` with a
group-less consumer (they commit nothing and move no consumer group) and print one line per letter,
or counts by reason. The record's value (the original event, possibly user text) is never printed.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Annotated

import typer
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from monitor.contracts.sections import KafkaSettings
from monitor.runtime.app import aiokafka_kwargs, bootstrap, broker_unreachable

app = typer.Typer(help="Read the dead-letter topic: reason, field and detail of each letter.", no_args_is_help=True)

JSON_HELP = "One JSON object per line instead of text."


@dataclass(frozen=True)
class Letter:
    time: str  # the record's broker time, ISO-8601 UTC
    partition: int
    offset: int
    reason: str
    field: str
    stage: str
    detail: str
    conversation: str  # the key's keyed reference: the one the worker's log line shows
    original_bytes: int | None


Reference = Callable[[str], str]


def letter_of(record: ConsumerRecord[bytes, bytes], reference: Reference) -> Letter:
    headers = {k: v.decode("utf-8", "replace") for k, v in (record.headers or ())}
    size = headers.get("convmon-original-bytes", "")
    return Letter(
        time=datetime.fromtimestamp(record.timestamp / 1000, UTC).isoformat(timespec="seconds"),
        partition=record.partition, offset=record.offset, reason=headers.get("convmon-reason", "-"),
        field=headers.get("convmon-field", "-"), stage=headers.get("convmon-stage", "-"),
        detail=headers.get("convmon-detail", ""), conversation=_ref(record.key, reference),
        original_bytes=int(size) if size.isdigit() else None)



def _ref(key: bytes | None, reference: Reference) -> str:
    return reference(key.decode("utf-8", "surrogateescape")) if key else "-"


async def read_letters(kafka: KafkaSettings, *, last: int | None, reference: Reference) -> list[Letter]:
    """Every letter on the topic now (``last``: only the newest ``last`` of each partition), oldest first."""
    topic = kafka.topic("dead-letters")
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap(kafka), group_id=None, enable_auto_commit=False,
                                fetch_max_wait_ms=100, **aiokafka_kwargs(kafka))
    try:
        await consumer.start()
    except KafkaError as exc:
        await consumer.stop()
        raise broker_unreachable(kafka, exc) from exc
    try:
        ids = topic in await consumer.topics() and consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(ids)]
        if not tps:
            return []
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        starts = await consumer.beginning_offsets(tps)
        letters: list[Letter] = []
        for tp in tps:
            start = starts[tp] if last is None else max(starts[tp], ends[tp] - last)
            if start >= ends[tp]:
                continue
            consumer.seek(tp, start)
            position = start
            while position < ends[tp]:
                batch = await consumer.getmany(tp, timeout_ms=1000)
                for record in batch.get(tp, []):
                    if record.offset < ends[tp]:
                        letters.append(letter_of(record, reference))
                    position = record.offset + 1
        return sorted(letters, key=lambda x: (x.time, x.partition, x.offset))
    finally:
        await consumer.stop()


def summarize(letters: list[Letter]) -> dict[str, object]:
    by_reason = Counter(x.reason for x in letters)
    by_field = Counter(f"{x.reason}/{x.field}" for x in letters)
    return {"letters": len(letters), "by_reason": dict(by_reason.most_common()),
            "by_reason_and_field": dict(by_field.most_common())}


def _settings() -> tuple[KafkaSettings, Reference]:
    """Kafka, and the deployment's conversation references (CONVMON_PII_REFERENCE_KEY, else the label store's
    key), so a letter shows the reference the worker logged for it."""
    from distill.reference_key import conversation_ref
    from distill.store import LabelStore
    from monitor.contracts.settings import load_settings

    settings = load_settings()
    store = None if settings.pii_reference_key is not None else LabelStore.from_settings(settings.distill)
    try:
        return settings.kafka, conversation_ref(settings.pii_reference_key, store)
    finally:
        if store is not None:
            store.close()


@app.command()
def tail(
    last: Annotated[int, typer.Option("-n", "--last", min=1, max=100_000,
                                      help="Newest letters of each partition to print.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Print the newest dead letters, one line each: time, reason, field, stage, conversation reference, detail."""
    kafka, reference = _settings()
    letters = asyncio.run(read_letters(kafka, last=last, reference=reference))
    for x in letters:
        if as_json:
            print(json.dumps(asdict(x)))
        else:
            print(f"{x.time} {x.reason} field={x.field} stage={x.stage} conversation={x.conversation} "
                  f"p{x.partition}@{x.offset}: {x.detail}")
    if not as_json and not letters:
        print(f"no dead letters on {kafka.topic('dead-letters')}")


@app.command()
def summary(as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False) -> None:
    """Count every dead letter on the topic by reason (and by reason and field)."""
    kafka, reference = _settings()
    counts = summarize(asyncio.run(read_letters(kafka, last=None, reference=reference)))
    if as_json:
        print(json.dumps(counts))
        return
    print(f"{counts['letters']} dead letters on {kafka.topic('dead-letters')}")
    by_reason: dict[str, int] = counts["by_reason"]  # type: ignore[assignment]
    by_field: dict[str, int] = counts["by_reason_and_field"]  # type: ignore[assignment]
    for reason, n in by_reason.items():
        fields = ", ".join(f"{k.split('/', 1)[1]} {m}" for k, m in by_field.items() if k.split("/", 1)[0] == reason)
        print(f"{n:>8}  {reason}  (field: {fields})")
