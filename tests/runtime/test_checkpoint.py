"""The checkpoint (runtime/checkpoint.py, #31): a batch's sends and counts are acknowledged before its totals are
exported and its session writes handed over; a record the broker did not take is counted, blocks offset commits
in faust's consumer (the worker's real one, through its transport) and stops the worker (#18 item 7)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.runtime.app import App, Topics, create_app
from monitor.runtime.checkpoint import Checkpoint
from monitor.runtime.deadletter import DeadLetters
from monitor.runtime.delivery import GuardedConsumer
from monitor.runtime.tablestore import TableStore
from monitor.stages.hotpath import Send
from monitor.stages.scoring import Delivery
from monitor.stages.totals import PartitionTotals

SCORED = ("scored", ("distilled",))


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def build(make_settings: Any, **kwargs: Any) -> tuple[App, Topics, Checkpoint, Metrics]:
    app, topics = create_app(make_settings(broker_url="kafka://127.0.0.1:1"))
    metrics = Metrics(CollectorRegistry())
    counts, sessions = TableStore(app.Table("scored", partitions=4)), TableStore(app.Table("sessions", partitions=4))
    totals = PartitionTotals(counts, metrics.partition_families)
    checkpoint = Checkpoint(app, topics, DeadLetters(topics.dead_letters, metrics), metrics, counts=counts,
                            sessions=sessions, totals=totals, partitions=4, **kwargs)
    app.checkpoint = checkpoint
    return app, topics, checkpoint, metrics


class Broker:
    """The producer and the scores topic, recording what is handed over; every delivery waits for ``settle``."""

    def __init__(self, app: App, topics: Topics) -> None:
        self.log: list[str] = []
        self.futures: list[tuple[str, asyncio.Future[None]]] = []

        async def send_many(topic: str, partition: int, records: list[Any]) -> list[Any]:
            return [SimpleNamespace(future=self._future(topic.rsplit("-", 2)[-2]), records=len(records))]

        async def send(**_: Any) -> asyncio.Future[None]:
            return self._future("scores")

        async def flush() -> None:
            self.log.append("flush")

        app.producer.send_many = send_many  # type: ignore[attr-defined]
        app.producer.flush = flush  # type: ignore[method-assign]
        topics.scores.send = send  # type: ignore[method-assign]

    def _future(self, name: str) -> asyncio.Future[None]:
        self.log.append(name)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.futures.append((name, future))
        return future

    def settle(self, failing: str | None = None) -> None:
        for name, future in self.futures:
            if not future.done():
                future.set_exception(KafkaTimeoutError()) if name == failing else future.set_result(None)


@pytest.mark.parametrize("failing", [None, "scores", "scored"])
def test_sessions_go_out_only_after_the_batchs_outputs_and_counts_are_acknowledged(make_settings,
                                                                                   failing: str | None) -> None:
    app, topics, checkpoint, metrics = build(make_settings)
    broker = Broker(app, topics)

    async def run() -> tuple[bool, list[str]]:
        checkpoint.totals.rebuild({0})
        checkpoint.totals.add(0, {SCORED: 1.0})
        checkpoint.totals.commit(0)  # the batch's count: totals and commit record in the scored table
        checkpoint.sessions.put("turn", {"t": 1}, 0)  # the batch's session write
        commit = asyncio.create_task(checkpoint.commit(Delivery(scores=[Send(b"c", b"{}", [])]), sessions=True))
        await asyncio.sleep(0.01)
        waiting = list(broker.log)
        assert checkpoint.totals.exported() == {0: {}}  # nothing exported while a delivery is in flight
        broker.settle(failing)
        return await commit, waiting

    ok, waiting = asyncio.run(run())
    assert waiting == ["scores", "scored", "flush"]  # outputs, counts, flush; the sessions wait
    assert ok is (failing is None)
    if failing is None:
        assert broker.log[-1] == "sessions" and checkpoint.sessions.pending == 0
        assert checkpoint.totals.exported() == {0: {SCORED: 1.0}} and checkpoint.commit_allowed()
    else:  # a crash now re-delivers the batch to the sessions as they were before it
        assert "sessions" not in broker.log and checkpoint.sessions.pending == 1
        assert checkpoint.totals.exported() == {0: {}} and not checkpoint.commit_allowed()
        name = topics.scores.get_topic_name() if failing == "scores" else "scored-changelog"
        assert sample(metrics, "convmon_delivery_failures_total", topic=name) == 1


def test_a_failed_delivery_is_counted_blocks_commits_and_stops_the_worker(make_settings) -> None:
    fatal: list[BaseException] = []
    _, _, checkpoint, metrics = build(make_settings, on_fatal=fatal.append, exit_after_s=0.05)

    async def run() -> None:
        ok, lost = asyncio.get_running_loop().create_future(), asyncio.get_running_loop().create_future()
        checkpoint.watch(ok, "t.scores")
        checkpoint.watch(lost, "app-sessions-changelog")
        ok.set_result(None)
        await asyncio.sleep(0)
        assert checkpoint.commit_allowed()
        lost.set_exception(ConnectionError("broker gone"))
        # the commit right after a flush may run before the future's callbacks: still refused
        assert not checkpoint.commit_allowed()
        await asyncio.sleep(0.2)
        assert not checkpoint.commit_allowed()

    asyncio.run(run())
    assert sample(metrics, "convmon_delivery_failures_total", topic="app-sessions-changelog") == 1  # once
    assert sample(metrics, "convmon_delivery_failures_total", topic="t.scores") is None
    assert sample(metrics, "convmon_offset_commits_blocked") == 1
    assert sample(metrics, "convmon_offset_commits_refused_total") == 2
    assert [type(e) for e in fatal] == [ConnectionError]  # once, after exit_after_s


def test_the_workers_consumer_refuses_commits_once_a_delivery_failed(make_settings) -> None:
    app, _, checkpoint, metrics = build(make_settings)
    consumer = app.consumer
    assert isinstance(consumer, GuardedConsumer)

    async def run() -> bool:
        checkpoint.fail(TimeoutError(), "t.judge")
        return await consumer._commit({})

    assert asyncio.run(run()) is False
    assert sample(metrics, "convmon_offset_commits_refused_total") == 1


def test_a_table_flush_the_producer_refuses_blocks_commits(make_settings) -> None:
    """A batch send that raises part way leaves the batches queued before it unchecked: commits stop at once."""
    app, _, checkpoint, metrics = build(make_settings)

    async def refused(topic: str, partition: int, records: list[Any]) -> list[Any]:
        raise KafkaTimeoutError()

    app.producer.send_many = refused  # type: ignore[attr-defined]

    async def run() -> None:
        checkpoint.counts.put("k", {"v": 1}, partition=1)
        with pytest.raises(KafkaTimeoutError):
            await checkpoint.commit(Delivery())
        assert not checkpoint.commit_allowed()

    asyncio.run(run())
    assert sample(metrics, "convmon_delivery_failures_total", topic="scored-changelog") == 1
    assert sample(metrics, "convmon_offset_commits_blocked") == 1
