"""A topic read whole once more at the end of a run, independently of the tail that followed it.

The tail (``topic_io.TopicTail``) reads while the run goes on, from positions it keeps between polls
(and before the fix it took "no records within 300 ms" for the end). This read starts every partition
at its first offset with a fresh consumer and stops only when its position reached the high watermark
that the broker's fetch responses report, confirmed by a later fetch (Tansu's ListOffsets(latest) is
short of the end: monitor/runtime/log_ends.py), so what it returns is
what the broker holds at the end of the run: the per-id table is made from it. ``compare`` says, per
partition, where the tail and this read disagree.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import ConsumerRecord, TopicPartition

from tests.support.topic_io import read_to_fetched_end, reader


@dataclass
class ReadBack:
    """Every record of a topic, and per partition where the read ended and what the broker said the end was."""

    topic: str
    records: list[ConsumerRecord] = field(default_factory=list)
    fetched_end: dict[int, int | None] = field(default_factory=dict)  # the high watermark of the last fetch
    listed_end: dict[int, int] = field(default_factory=dict)  # ListOffsets(latest), for the record
    position: dict[int, int] = field(default_factory=dict)
    complete: bool = False  # every partition read to its fetched high watermark
    first_records_s: float | None = None  # how long the first fetched records took to come
    duration_s: float = 0.0


def read_to_end(bootstrap: str, topic: str, *, timeout_s: float = 120.0, fetch_max_wait_ms: int = 100) -> ReadBack:
    """Read ``topic`` from its first offsets until each partition's position reached its fetched high watermark,
    confirmed by a later fetch (a partition still being written is read on to its end then)."""
    return asyncio.run(_read_to_end(bootstrap, topic, timeout_s, fetch_max_wait_ms))


async def _read_to_end(bootstrap: str, topic: str, timeout_s: float, fetch_max_wait_ms: int) -> ReadBack:
    started = time.monotonic()
    out = ReadBack(topic)
    consumer = reader(bootstrap, fetch_max_wait_ms=fetch_max_wait_ms)
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not tps:
            return out
        consumer.assign(tps)
        sought = time.monotonic()  # the fetches start with the seek (its offset reset), not with the first getmany
        await consumer.seek_to_beginning(*tps)
        out.records, out.complete = await read_to_fetched_end(
            consumer, tps, timeout_s=timeout_s, confirm=True,
            on_first=lambda _: setattr(out, "first_records_s", round(time.monotonic() - sought, 3)))
        out.listed_end = {tp.partition: int(end) for tp, end in (await consumer.end_offsets(tps)).items()}
        for tp in tps:
            out.fetched_end[tp.partition] = consumer.highwater(tp)
            out.position[tp.partition] = await consumer.position(tp)
    finally:
        await consumer.stop()
    out.duration_s = round(time.monotonic() - started, 1)
    return out


def _identity(r: ConsumerRecord) -> tuple[int, int, str]:
    return r.partition, r.offset, hashlib.blake2b(r.value or b"", digest_size=8).hexdigest()


def compare(tail: Sequence[ConsumerRecord], full: ReadBack, tail_positions: dict[int, int]) -> dict[str, Any]:
    """Per partition: records the tail read, records the full read found, and what only one of them has
    (by partition, offset and value: an offset reused for another record after a restart shows as both)."""
    mine, theirs = Counter(map(_identity, tail)), Counter(map(_identity, full.records))
    partitions = sorted({p for p, _, _ in mine} | {p for p, _, _ in theirs} | set(full.fetched_end))
    per: dict[str, dict[str, Any]] = {}
    for p in partitions:
        a = {k: n for k, n in mine.items() if k[0] == p}
        b = {k: n for k, n in theirs.items() if k[0] == p}
        only_tail, only_full = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        per[str(p)] = {
            "tail_records": sum(a.values()), "full_records": sum(b.values()),
            "tail_position": tail_positions.get(p), "full_position": full.position.get(p),
            "fetched_end": full.fetched_end.get(p), "listed_end": full.listed_end.get(p),
            "only_in_tail": len(only_tail), "only_in_full": len(only_full),
            "first_only_in_full": [o for _, o, _ in only_full[:5]],
            "first_only_in_tail": [o for _, o, _ in only_tail[:5]],
            "offsets_seen_twice_by_tail": sum(1 for n in a.values() if n > 1),
        }
    disagree = sorted(p for p, d in per.items() if d["only_in_tail"] or d["only_in_full"])
    return {"topic": full.topic, "complete": full.complete, "duration_s": full.duration_s,
            "first_records_s": full.first_records_s,
            "tail_records": len(tail), "full_records": len(full.records), "partitions_disagreeing": disagree,
            "partitions": per}
