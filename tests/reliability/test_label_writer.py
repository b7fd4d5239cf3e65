"""The label writer under a store outage, without a broker: buffered, retried, then all written."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry

from monitor.contracts.errors import StoreError
from monitor.contracts.metrics import Metrics
from monitor.stages.labels import BufferedLabelWriter


class FlakyStore:
    """An upsert that fails while ``down`` and records every row it accepted."""

    def __init__(self) -> None:
        self.down = True
        self.rows: list[dict[str, Any]] = []

    def upsert(self, batch: list[dict[str, Any]]) -> None:
        if self.down:
            raise StoreError("label store 'sqlite:///x': cannot upsert labels: database is locked")
        self.rows.extend(batch)


def _value(metrics: Metrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


def test_buffered_labels_are_written_when_the_store_returns_without_new_traffic() -> None:
    """Before the fix, the buffer was only retried by the next write() call: with no new label
    after the outage, buffered labels stayed in memory forever."""
    store, metrics = FlakyStore(), Metrics(CollectorRegistry())

    async def run() -> None:
        writer = BufferedLabelWriter(store.upsert, metrics, max_buffer=100, max_backoff_s=0.2)
        await writer.write([{"n": i} for i in range(5)])
        await writer.write([{"n": i} for i in range(5, 8)])
        assert writer.pending == 8 and _value(metrics, "convmon_label_store_buffered") == 8
        assert _value(metrics, "convmon_label_store_errors_total") >= 2
        store.down = False
        for _ in range(50):
            if not writer.pending:
                break
            await asyncio.sleep(0.1)
        assert writer.pending == 0

    asyncio.run(run())
    assert sorted(r["n"] for r in store.rows) == list(range(8))
    assert _value(metrics, "convmon_label_store_buffered") == 0


def test_concurrent_flushes_neither_lose_nor_drop_records() -> None:
    """The retry task and the agent's write() may flush at once; each record is written, none dropped."""
    store, metrics = FlakyStore(), Metrics(CollectorRegistry())

    async def run() -> None:
        writer = BufferedLabelWriter(store.upsert, metrics, max_buffer=1000, max_backoff_s=0.05)
        await writer.write([{"n": i} for i in range(10)])
        store.down = False
        await asyncio.gather(*(writer.write([{"n": i}]) for i in range(10, 40)))
        for _ in range(50):
            if not writer.pending:
                break
            await asyncio.sleep(0.05)

    asyncio.run(run())
    assert sorted({r["n"] for r in store.rows}) == list(range(40))


def test_a_full_buffer_holds_the_stream_until_the_store_is_back() -> None:
    store, metrics = FlakyStore(), Metrics(CollectorRegistry())

    async def run() -> None:
        writer = BufferedLabelWriter(store.upsert, metrics, max_buffer=3, max_backoff_s=0.05)
        blocked = asyncio.create_task(writer.write([{"n": i} for i in range(5)]))
        await asyncio.sleep(0.3)
        assert not blocked.done()  # the agent is held: Kafka keeps the records
        store.down = False
        await asyncio.wait_for(blocked, 5)
        assert writer.pending == 0

    asyncio.run(run())
    assert sorted(r["n"] for r in store.rows) == list(range(5))
