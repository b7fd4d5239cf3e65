"""`convmon dead-letters tail | summary`: what the dead-letter topic holds, from its headers.

The precise reason of a dead letter lives in its headers (``convmon-reason``, ``convmon-field``,
``convmon-detail``, ``convmon-stage``: monitor/stages/deadletter.py); the worker's log names only the
reason, the field and an opaque reference. These commands read ``<prefix>dead-letters`` with a
group-less consumer (they commit nothing and move no consumer group) and print one line per letter,
or counts by reason. The record's value (the original event, possibly user text) is never printed.

They read each partition to its real end: the end offset the broker lists is only where reading may stop
(the development broker lists the last record batch's base offset + 1); a partition is read until a fetch
returns nothing more and the position is at the high watermark the fetches report. So ``summary`` counts what
``convmon_dead_letters_total`` counted, and ``tail`` starts from the newest letters, not from the listed end.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Annotated, Protocol

import typer
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from monitor.contracts.sections import KafkaSettings
from monitor.runtime.clients import aiokafka_kwargs, bootstrap, broker_unreachable

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


READ_TIMEOUT_S = 30.0  # longest a command reads; a partition not read to its end by then is reported
FETCH_WAIT_MS = 200


class LogConsumer(Protocol):
    """The part of :class:`aiokafka.AIOKafkaConsumer` the reader uses (a stand-in in unit tests)."""

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]: ...

    def highwater(self, partition: TopicPartition) -> int | None: ...

    async def position(self, partition: TopicPartition) -> int: ...


@dataclass(frozen=True)
class PartitionRead:
    records: list[ConsumerRecord[bytes, bytes]]
    end: int  # the log end the reader reached (or, when incomplete, the highest it knew of)
    complete: bool


async def _fetch_end(consumer: LogConsumer, tp: TopicPartition, listed: int, deadline: float) -> int:
    """The partition's end as a fetch from ``listed`` reports it: the larger of the two. Tansu answers
    ListOffsets with the base offset of the last record batch + 1 (4 records in one batch: end 1), while its
    fetch responses carry the true high watermark; on Kafka both agree."""
    loop = asyncio.get_running_loop()
    consumer.seek(tp, listed)
    while loop.time() < deadline:
        await consumer.getmany(tp, timeout_ms=FETCH_WAIT_MS, max_records=1)
        highwater = consumer.highwater(tp)
        if highwater is not None:
            return max(listed, highwater)
    return listed


async def read_partition(consumer: LogConsumer, tp: TopicPartition, *, start: int, listed_end: int,
                         last: int | None, deadline: float) -> PartitionRead:
    """Every record of ``tp`` from ``start`` (``last``: only the newest ``last``) to the log's real end: until a
    fetch returns nothing and the position is at the high watermark the fetches report, or until ``deadline``."""
    loop = asyncio.get_running_loop()
    end = listed_end
    if last is not None:  # the newest: where the log really ends decides where to start
        end = await _fetch_end(consumer, tp, listed_end, deadline)
        start = max(start, end - last)
    consumer.seek(tp, start)
    records: list[ConsumerRecord[bytes, bytes]] = []
    while loop.time() < deadline:
        batch = (await consumer.getmany(tp, timeout_ms=FETCH_WAIT_MS)).get(tp, [])
        records.extend(r for r in batch if r.offset >= start)
        highwater = consumer.highwater(tp)
        if highwater is not None:
            end = max(end, highwater)
        if not batch and highwater is not None and await consumer.position(tp) >= end:
            newest = records[-last:] if last is not None else records
            return PartitionRead(newest, end, True)
    return PartitionRead(records[-last:] if last is not None else records, end, False)


async def read_letters(kafka: KafkaSettings, *, last: int | None, reference: Reference,
                       timeout_s: float = READ_TIMEOUT_S) -> list[Letter]:
    """Every letter on the topic now (``last``: only the newest ``last`` of each partition), oldest first.
    A partition not read to its end within ``timeout_s`` is reported on stderr, with what was read."""
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
        deadline = asyncio.get_running_loop().time() + timeout_s
        letters: list[Letter] = []
        for tp in tps:
            read = await read_partition(consumer, tp, start=starts[tp], listed_end=ends[tp], last=last,
                                        deadline=deadline)
            letters.extend(letter_of(record, reference) for record in read.records)
            if not read.complete:
                print(f"warning: {topic} partition {tp.partition} was not read to its end within {timeout_s:.0f} s "
                      f"(read {len(read.records)} letters; its end is at least offset {read.end})", file=sys.stderr)
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
