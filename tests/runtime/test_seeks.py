"""The worker's consumer fetches nothing of a stream partition while it seeks to the committed offsets, and
counts every gap faust records (runtime/seeks.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import SimpleNamespace
from typing import Any

import faust.transport.consumer
import pytest
from faust.types import TP
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.runtime.app import create_app
from monitor.runtime.seeks import on_gap


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def one_partition_seeking(make_settings, seek: Callable[[Any], Awaitable[Mapping[TP, int]]]) -> Any:
    """The worker's consumer, assigned one events partition (active), whose seek runs ``seek(app)``."""
    app, _ = create_app(make_settings(broker_url="kafka://127.0.0.1:1"))
    consumer = app.consumer
    consumer.assignment = lambda: {EVENTS}
    consumer.resume_partitions({EVENTS})
    consumer.seek_to_committed = lambda: seek(app)
    return consumer


EVENTS = TP("t.events", 0)


def test_every_gap_is_counted_and_logged(make_settings, caplog: pytest.LogCaptureFixture) -> None:
    app, _ = create_app(make_settings(broker_url="kafka://127.0.0.1:1"))
    metrics = Metrics(CollectorRegistry())
    on_gap(app, lambda topic, n: metrics.gap_offsets.labels(topic).inc(n))
    tp = TP("t.events", 2)
    with caplog.at_level(logging.WARNING, logger="monitor.runtime.seeks"):
        asyncio.run(app.consumer._add_gap(tp, 68, 384))  # faust's range ends at the record delivered, 384
    # not read again: nothing shows 68-383 were empty, so they count as skipped input
    assert sample(metrics, "convmon_consumer_gap_offsets_total", topic="t.events") == 316
    assert "offsets 68-383 of t.events[2] will be committed without a record" in caplog.text
    assert "316 skipped" in caplog.text and "0 empty" in caplog.text
    assert app.consumer._gap[tp]  # faust still records it (a transactional producer's markers are real gaps)


def rewinding(make_settings, monkeypatch: pytest.MonkeyPatch,
              fetches: list[list[tuple[TP, int]]]) -> tuple[Any, list[tuple[TP, int]]]:
    """The worker's consumer whose fetches return ``fetches`` (records by offset), one list per getmany."""
    app, _ = create_app(make_settings(broker_url="kafka://127.0.0.1:1"))
    consumer = app.consumer
    sought: list[tuple[TP, int]] = []
    batches = iter(fetches)

    async def fetched(self: Any, timeout: float) -> AsyncIterator[tuple[TP, Any]]:
        for tp, offset in next(batches):
            yield tp, SimpleNamespace(offset=offset)

    async def seek(tp: TP, offset: int) -> None:
        sought.append((tp, offset))

    monkeypatch.setattr(faust.transport.consumer.Consumer, "getmany", fetched)
    monkeypatch.setattr(app.topics, "acks_enabled_for", lambda topic: topic == EVENTS.topic)
    consumer._seek = seek
    return consumer, sought


async def read(consumer: Any) -> list[tuple[int, int]]:
    return [(tp.partition, m.offset) async for tp, m in consumer.getmany(timeout=0)]


def test_a_jump_past_the_next_offset_is_read_again_and_a_repeated_one_is_a_gap(make_settings, monkeypatch) -> None:
    other, changelog = TP(EVENTS.topic, 1), TP("app-sessions-changelog", 0)
    consumer, sought = rewinding(make_settings, monkeypatch, [
        [(EVENTS, 192), (other, 5), (EVENTS, 193), (changelog, 40)],  # 112-191 skipped; a changelog may jump
        [(EVENTS, 112), (EVENTS, 113)],  # read again from 112
        [(EVENTS, 120), (EVENTS, 121)],  # 114-119 missing: rewound to 114...
        [(EVENTS, 120)],  # ...and missing again: a real gap (a transactional producer's markers), delivered
    ])
    consumer._expect(EVENTS, 112)
    consumer._expect(changelog, 3)

    async def run() -> list[list[tuple[int, int]]]:
        return [await read(consumer) for _ in range(4)]

    assert asyncio.run(run()) == [[(1, 5), (0, 40)], [(0, 112), (0, 113)], [], [(0, 120)]]
    assert sought == [(EVENTS, 112), (EVENTS, 114)]
    assert consumer._next[EVENTS] == 121


def test_the_seek_to_the_committed_offsets_sets_where_each_stream_partition_must_go_on(make_settings) -> None:
    async def committed(app: Any) -> Mapping[TP, int]:
        return {EVENTS: 7}

    consumer = one_partition_seeking(make_settings, committed)
    consumer._next[EVENTS] = 300  # where the partition was before the rebalance
    asyncio.run(consumer.perform_seek())
    assert consumer._next[EVENTS] == 7 and consumer._get_active_partitions() == {EVENTS}


@pytest.mark.parametrize(("log_start", "skipped", "empty"), [(0, None, 6), (117, 3, 3), (500, 6, None),
                                                            (None, 6, None)])
def test_a_gap_confirmed_by_the_re_read_counts_as_empty_inside_the_log(
        make_settings, monkeypatch, caplog: pytest.LogCaptureFixture, log_start: int | None, skipped: float | None,
    empty: float | None) -> None:
    """#31: a durable broker restart that lost nothing counted gap offsets and paged ConvmonInputSkipped. The
    offsets the re-read from the same offset jumped over again hold no record: empty, not skipped, unless
    they lie below the partition's log start (records deleted or lost before they were read); a log start
    the broker does not answer counts them skipped (page rather than hide a loss)."""
    consumer, sought = rewinding(make_settings, monkeypatch, [[(EVENTS, 120)], [(EVENTS, 120)]])
    metrics = Metrics(CollectorRegistry())
    on_gap(consumer.app, lambda topic, n: metrics.gap_offsets.labels(topic).inc(n),
           empty=lambda topic, n: metrics.empty_offsets.labels(topic).inc(n))

    async def log_starts(*partitions: TP) -> Mapping[TP, int]:
        return {} if log_start is None else {TP(tp.topic, tp.partition): log_start for tp in partitions}

    consumer.log_starts = log_starts
    consumer._expect(EVENTS, 114)

    async def run() -> list[list[tuple[int, int]]]:
        delivered = [await read(consumer) for _ in range(2)]
        await consumer._add_gap(EVENTS, 114, 120)  # what faust's drain loop does with the record at 120
        return delivered

    with caplog.at_level(logging.WARNING, logger="monitor.runtime.seeks"):
        assert asyncio.run(run()) == [[], [(0, 120)]] and sought == [(EVENTS, 114)]
    # the fault suite counts only the line of a gap that skipped records (tests/reliability/fault_run.py)
    assert ("will be committed without a record" in caplog.text) == (skipped is not None)
    assert ("offsets 114-119 of t.events[0] held no record when read again" in caplog.text) == (skipped is None)
    assert sample(metrics, "convmon_consumer_gap_offsets_total", topic=EVENTS.topic) == skipped
    assert sample(metrics, "convmon_consumer_empty_offsets_total", topic=EVENTS.topic) == empty
