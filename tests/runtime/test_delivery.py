"""The delivery guard (#18 item 7): a record the broker did not take is counted, blocks offset commits in
faust's consumer (the worker's real one, through its transport) and stops the worker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.runtime.app import create_app
from monitor.runtime.delivery import DeliveryGuard, GuardedConsumer, install
from monitor.runtime.tablestore import TableStore


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_failed_delivery_is_counted_blocks_commits_and_stops_the_worker() -> None:
    metrics = Metrics(CollectorRegistry())
    fatal: list[BaseException] = []

    async def run() -> None:
        guard = DeliveryGuard(metrics, on_fatal=fatal.append, exit_after_s=0.05)
        ok, lost = asyncio.get_running_loop().create_future(), asyncio.get_running_loop().create_future()
        guard.watch(ok, "t.scores")
        guard.watch(lost, "app-sessions-changelog")
        ok.set_result(None)
        await asyncio.sleep(0)
        assert guard.commit_allowed()
        lost.set_exception(ConnectionError("broker gone"))
        # the commit right after a flush may run before the future's callbacks: still refused
        assert not guard.commit_allowed()
        await asyncio.sleep(0.2)
        assert not guard.commit_allowed()

    asyncio.run(run())
    assert sample(metrics, "convmon_delivery_failures_total", topic="app-sessions-changelog") == 1
    assert sample(metrics, "convmon_delivery_failures_total", topic="t.scores") is None
    assert sample(metrics, "convmon_offset_commits_blocked") == 1
    assert sample(metrics, "convmon_offset_commits_refused_total") == 2
    assert [type(e) for e in fatal] == [ConnectionError]  # once, after exit_after_s


def test_the_workers_consumer_refuses_commits_once_a_delivery_failed(make_settings) -> None:
    app, _ = create_app(make_settings(broker_url="kafka://127.0.0.1:1"))
    consumer = app.consumer
    assert isinstance(consumer, GuardedConsumer)
    metrics = Metrics(CollectorRegistry())

    async def run() -> bool:
        guard = DeliveryGuard(metrics)
        install(app, guard)
        guard.fail(TimeoutError(), "t.judge")
        return await consumer._commit({})

    assert asyncio.run(run()) is False
    assert sample(metrics, "convmon_offset_commits_refused_total") == 1


def test_a_table_flush_the_producer_refuses_blocks_commits(make_settings) -> None:
    """A batch send that raises part way leaves the batches queued before it unwatched: the guard fails at once."""
    app, _ = create_app(make_settings(broker_url="kafka://127.0.0.1:1"))
    metrics = Metrics(CollectorRegistry())
    table = app.Table("flushed", partitions=2)

    async def refused(topic: str, partition: int, records: list[Any]) -> list[Any]:
        raise KafkaTimeoutError()

    app.producer.send_many = refused  # type: ignore[attr-defined]

    async def run() -> None:
        guard = DeliveryGuard(metrics)
        store = TableStore(table, guard)
        store.put("k", {"v": 1}, partition=1)
        with pytest.raises(KafkaTimeoutError):
            await store.flush()
        assert not guard.commit_allowed()

    asyncio.run(run())
    assert sample(metrics, "convmon_delivery_failures_total", topic="flushed-changelog") == 1
    assert sample(metrics, "convmon_offset_commits_blocked") == 1
