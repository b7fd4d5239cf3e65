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
from monitor.runtime.delivery import GuardedConsumer
from monitor.runtime.seeks import on_gap


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_stream_partitions_are_paused_while_the_seek_runs_and_only_those_are_resumed(make_settings) -> None:
    app, _ = create_app(make_settings(broker_url="kafka://127.0.0.1:1"))
    consumer = app.consumer
    assert isinstance(consumer, GuardedConsumer)
    events = [TP("t.events", p) for p in range(3)]
    changelog, held = TP("app-sessions-changelog", 0), TP("t.judge", 0)
    consumer.assignment = lambda: {*events, changelog, held}  # type: ignore[method-assign]
    consumer._is_changelog_tp = lambda tp: tp.topic.endswith("-changelog")  # type: ignore[method-assign]
    consumer.resume_partitions({*events, changelog})
    consumer.pause_partitions({held})  # paused by someone else (recovery): stays paused
    during: list[set[TP]] = []

    async def seek_to_committed() -> Mapping[TP, int]:
        await asyncio.sleep(0.05)  # the fetch loop could run now
        during.append(set(consumer._get_active_partitions()))
        return {tp: 7 for tp in events}

    consumer.seek_to_committed = seek_to_committed  # type: ignore[method-assign]
    asyncio.run(consumer.perform_seek())
    assert during == [{changelog}]
    assert consumer._get_active_partitions() == {*events, changelog}
    assert held in consumer._paused_partitions
    assert {consumer._read_offset[tp] for tp in events} == {7}


def one_partition_seeking(make_settings, seek: Callable[[Any], Awaitable[Mapping[TP, int]]]) -> Any:
    """The worker's consumer, assigned one events partition (active), whose seek runs ``seek(app)``."""
    app, _ = create_app(make_settings(broker_url="kafka://127.0.0.1:1"))
    consumer = app.consumer
    consumer.assignment = lambda: {EVENTS}
    consumer.resume_partitions({EVENTS})
    consumer.seek_to_committed = lambda: seek(app)
    return consumer


EVENTS = TP("t.events", 0)


def test_a_failed_seek_resumes_the_partitions_it_paused(make_settings) -> None:
    async def fails(app: Any) -> Mapping[TP, int]:
        raise TimeoutError

    consumer = one_partition_seeking(make_settings, fails)
    with pytest.raises(TimeoutError):
        asyncio.run(consumer.perform_seek())
    assert consumer._get_active_partitions() == {EVENTS}


def test_every_gap_is_counted_and_logged(make_settings, caplog: pytest.LogCaptureFixture) -> None:
    app, _ = create_app(make_settings(broker_url="kafka://127.0.0.1:1"))
    metrics = Metrics(CollectorRegistry())
    on_gap(app, lambda topic, n: metrics.gap_offsets.labels(topic).inc(n))
    tp = TP("t.events", 2)
    with caplog.at_level(logging.WARNING, logger="monitor.runtime.seeks"):
        asyncio.run(app.consumer._add_gap(tp, 68, 384))
    assert sample(metrics, "convmon_consumer_gap_offsets_total", topic="t.events") == 317
    assert "offsets 68-384 of t.events[2] will be committed without a record" in caplog.text
    assert app.consumer._gap[tp]  # faust still records it (a transactional producer's markers are real gaps)


def test_a_rebalance_during_the_seek_leaves_the_partitions_to_its_recovery(make_settings) -> None:
    async def rebalanced(app: Any) -> Mapping[TP, int]:
        app.consumer_generation_id += 1  # a new rebalance: its recovery restores tables with these paused
        return {}

    consumer = one_partition_seeking(make_settings, rebalanced)
    asyncio.run(consumer.perform_seek())
    assert consumer._get_active_partitions() == set()


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


def test_with_flow_stopped_the_seek_pauses_and_resumes_nothing(make_settings) -> None:
    """faust's getmany seeks when flow is stopped (a rebalance): recovery may pause the partitions meanwhile."""
    async def recovery_pauses(app: Any) -> Mapping[TP, int]:
        app.consumer.pause_partitions({EVENTS})  # recovery: no events before the tables are restored
        return {EVENTS: 5}

    consumer = one_partition_seeking(make_settings, recovery_pauses)
    consumer.stop_flow()
    asyncio.run(consumer.perform_seek())
    assert consumer._get_active_partitions() == set() and EVENTS in consumer._paused_partitions
    assert consumer._next[EVENTS] == 5
