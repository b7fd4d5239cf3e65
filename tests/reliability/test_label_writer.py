"""The label sink's write path without a broker: retried through outages, bad rows isolated.

``LabelSink.store`` returns only when every row is stored or rejected; the agent acknowledges the
batch to Kafka after that (tests/reliability/test_edges_faults.py checks the whole path with
kill -9 during a PostgreSQL outage).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from distill.store import LabelStore
from monitor.contracts.errors import LabelRejected, StoreError
from monitor.contracts.metrics import Metrics
from monitor.stages.labels import LabelSink
from tests.reliability.pg import label_message, pg_store


class FlakyStore:
    """An upsert that fails while ``down``, refuses rows marked bad, and records every row it accepted."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0
        self.rows: list[dict[str, Any]] = []

    def upsert(self, batch: list[dict[str, Any]]) -> None:
        self.calls += 1
        if self.down:
            raise StoreError("label store 'sqlite:///x': cannot upsert labels: database is locked")
        if any(row.get("bad") for row in batch):
            raise LabelRejected("the database refused the data: DataError: NUL")
        self.rows.extend(batch)


def _value(metrics: Metrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


def _messages(rows: list[dict[str, Any]]) -> list[tuple[bytes | None, bytes]]:
    return [(str(i).encode(), orjson.dumps(row)) for i, row in enumerate(rows)]


def test_store_returns_only_after_the_outage_with_every_row_written() -> None:
    """Before the fix, labels were buffered in memory and acknowledged to Kafka during an outage."""
    store, metrics = FlakyStore(), Metrics(CollectorRegistry())
    sink = LabelSink(store.upsert, metrics, initial_backoff_s=0.01, max_backoff_s=0.05)
    seen_buffered: list[float] = []

    async def run() -> list[Any]:
        task = asyncio.create_task(sink.store(_messages([{"n": i} for i in range(8)])))
        deadline = time.monotonic() + 10  # two failed writes, so a retry, however slow the machine
        while _value(metrics, "convmon_label_store_errors_total") < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert not task.done(), "store() returned while the database was down"
        seen_buffered.append(_value(metrics, "convmon_label_store_buffered"))
        store.down = False
        return await asyncio.wait_for(task, 5)

    rejected = asyncio.run(run())
    assert rejected == []
    assert sorted(r["n"] for r in store.rows) == list(range(8))
    assert seen_buffered == [8.0]
    assert _value(metrics, "convmon_label_store_buffered") == 0
    assert _value(metrics, "convmon_label_store_errors_total") >= 2


def test_a_refused_row_is_rejected_alone_and_the_rest_are_stored() -> None:
    store, metrics = FlakyStore(), Metrics(CollectorRegistry())
    store.down = False
    sink = LabelSink(store.upsert, metrics)
    rows = [{"n": i, "bad": i in (3, 17)} for i in range(40)]
    rejected = asyncio.run(sink.store(_messages(rows) + [(b"x", b"{not json")]))
    assert sorted(r["n"] for r in store.rows) == [i for i in range(40) if i not in (3, 17)]
    assert [(r.key, r.reason) for r in rejected] == [(b"x", "label_invalid"), (b"3", "label_rejected"),
                                                     (b"17", "label_rejected")]
    assert "NUL" in rejected[1].detail and orjson.loads(rejected[1].raw)["n"] == 3
    assert store.calls < 20  # bisection, not one statement per row
    assert _value(metrics, "convmon_label_store_errors_total") == 0  # a refusal is not an outage


def test_postgresql_nul_in_conversation_id_is_rejected_alone_and_nul_in_text_is_sanitised() -> None:
    """A NUL in conversation_id used to make every retry fail, blocking the sink for good."""
    with pg_store("sink_nul_") as store:
        sink = LabelSink(store.upsert_raw, Metrics(CollectorRegistry()))
        messages = [(f"c{i}".encode(), orjson.dumps(label_message(f"c{i}", text="hi\x00there")))
                    for i in range(60)]
        messages[10] = (b"bad", orjson.dumps(label_message("c-\x00-nul")))
        rejected = asyncio.run(sink.store(messages))
        assert [(r.key, r.reason) for r in rejected] == [(b"bad", "label_rejected")]
        assert "NUL" in rejected[0].detail
        stored = store.fetch()
        assert len(stored) == 59
        assert all("\x00" not in t.text for r in stored for t in r.turns)


def test_a_message_that_is_not_a_judge_label_is_rejected_not_skipped(tmp_path) -> None:
    store = LabelStore(f"sqlite:///{tmp_path / 'labels.db'}")
    sink = LabelSink(store.upsert_raw, Metrics(CollectorRegistry()))
    messages = [(b"a", orjson.dumps(label_message("a"))), (b"b", orjson.dumps({"nonsense": 1}))]
    rejected = asyncio.run(sink.store(messages))
    assert [(r.key, r.reason) for r in rejected] == [(b"b", "label_rejected")]
    assert "not a judge label" in rejected[0].detail
    assert store.count() == 1
