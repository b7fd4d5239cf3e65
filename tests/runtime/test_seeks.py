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


def test_a_stream_partition_with_nothing_committed_is_sought_to_its_log_start(make_settings) -> None:
    """aiokafka seeks only committed offsets above 0: records fetched before the seek of a partition with no
    commit yet, then cleared with the queues, were never read again and the next commit passed them (#31)."""
    async def nothing_committed(app: Any) -> Mapping[TP, int | None]:
        return {EVENTS: None}

    consumer = one_partition_seeking(make_settings, nothing_committed)
    sought: list[tuple[TP, int]] = []

    async def seek(tp: TP, offset: int) -> None:
        sought.append((tp, offset))

    async def log_starts(*partitions: TP) -> Mapping[TP, int]:
        return {tp: 40 for tp in partitions}

    consumer._seek, consumer.log_starts = seek, log_starts
    consumer._next[EVENTS] = 300
    asyncio.run(consumer.perform_seek())
    assert sought == [(EVENTS, 40)] and consumer._next[EVENTS] == 40 and consumer._read_offset[EVENTS] == 40


def test_a_drop_reported_after_records_were_read_sends_the_partition_back(make_settings, monkeypatch) -> None:
    consumer, sought = rewinding(make_settings, monkeypatch, [
        [(EVENTS, 100), (EVENTS, 101), (EVENTS, 102), (EVENTS, 103)],
        [(EVENTS, 104)],  # after the drop of 102-103: read again from 102
        [(EVENTS, 102), (EVENTS, 103), (EVENTS, 104)],
    ])
    consumer._expect(EVENTS, 100)
    consumer._read_offset[EVENTS] = 100

    async def run() -> list[list[tuple[int, int]]]:
        first = await read(consumer)
        consumer._read_offset[EVENTS] = 103  # what the drain loop sets
        consumer.read_again(EVENTS, 102)
        return [first, await read(consumer), await read(consumer)]

    assert asyncio.run(run()) == [[(0, 100), (0, 101), (0, 102), (0, 103)], [], [(0, 102), (0, 103), (0, 104)]]
    assert sought == [(EVENTS, 102)]


def test_when_the_flow_resumes_every_stream_partition_is_read_again_from_its_seek(make_settings) -> None:
    """faust clears its queues (and the hot path's batches) when the flow resumes after the seek; at a first
    start the flow was never suspended, so what they held was read after the seek and would be lost."""
    async def committed(app: Any) -> Mapping[TP, int]:
        return {EVENTS: 7}

    consumer = one_partition_seeking(make_settings, committed)
    sought: list[tuple[TP, int]] = []

    async def seek(tp: TP, offset: int) -> None:
        sought.append((tp, offset))

    consumer._seek = seek

    async def run() -> None:
        await consumer.perform_seek()
        consumer._next[EVENTS], consumer._read_offset[EVENTS] = 60, 59  # records 7-59 read, sitting in a queue
        consumer.app.flow_control.resume()  # clears the queues
        assert consumer._next[EVENTS] == 7 and consumer._read_offset[EVENTS] == 7
        await asyncio.sleep(0.01)
        assert sought == [(EVENTS, 7)]  # read now, not only when a later record shows the jump
        consumer.app.flow_control.suspend()
        consumer.app.flow_control.clear()  # a revocation: the next assignment's seek reads them again
        await asyncio.sleep(0.01)
        assert sought == [(EVENTS, 7)]

    asyncio.run(run())


def test_where_the_seek_put_a_partition_is_taken_before_the_fetch_loop_runs_again(make_settings) -> None:
    """The log starts are asked for (an await) while the fetch loop moves the read offsets on: a worker took the
    read offset of 380 for where its seek had put a partition committed at 283, sought back there after the
    flow resumed, and never read 283-379 (a kill -9 run, 2026-11-28)."""
    fresh = TP("t.events", 1)

    async def committed(app: Any) -> Mapping[TP, int | None]:
        return {EVENTS: 283, fresh: None}

    consumer = one_partition_seeking(make_settings, committed)
    consumer.assignment = lambda: {EVENTS, fresh}
    sought: list[tuple[TP, int]] = []

    async def seek(tp: TP, offset: int) -> None:
        sought.append((tp, offset))

    async def log_starts(*partitions: TP) -> Mapping[TP, int]:
        consumer._read_offset[EVENTS] = 380  # the fetch loop ran meanwhile
        return {tp: 0 for tp in partitions}

    consumer._seek, consumer.log_starts = seek, log_starts

    async def run() -> None:
        await consumer.perform_seek()
        consumer.app.flow_control.resume()
        await asyncio.sleep(0.01)

    asyncio.run(run())
    assert consumer._started_at == {EVENTS: 283, fresh: 0}
    assert sorted(sought) == [(EVENTS, 283), (fresh, 0), (fresh, 0)]
