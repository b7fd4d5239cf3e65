"""The durable embedded broker the broker-restart fault runs on: Tansu's S3 storage engine against a local
S3 server keeps acknowledged records through a kill -9; the in-memory default (the control) does not."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from aiokafka import ConsumerRecord

from monitor.runtime.broker import EmbeddedBroker, ensure_topics
from tests.support.readback import read_to_end
from tests.support.s3_server import S3Server
from tests.support.topic_io import POLL_TIMEOUT_S, TopicTail, produce

pytestmark = pytest.mark.integration


def _kill_restart_and_read(broker: EmbeddedBroker, topic: str) -> list[bytes]:
    sent = [(f"k{i}".encode(), f"record-{i}".encode()) for i in range(100)]
    produce(broker.bootstrap, topic, sent)  # returns once every record is acknowledged (acks=all)
    broker.kill()
    broker.start()
    tail = TopicTail(broker.bootstrap, topic)
    for _ in range(3):  # a poll reads until the broker has nothing more; retry in case it just came up
        tail.poll()
        if len(tail.records) >= len(sent):
            break
    return [r.value for r in tail.records]


def test_s3_storage_keeps_acknowledged_records_through_kill_9(tmp_path: Path) -> None:
    with S3Server(tmp_path / "s3.log") as s3:
        broker = s3.broker(log_path=tmp_path / "broker.log").start()
        try:
            values = _kill_restart_and_read(broker, "durable")
        finally:
            broker.stop()
    assert sorted(values) == sorted(f"record-{i}".encode() for i in range(100))


def test_memory_storage_loses_them_the_control(tmp_path: Path) -> None:
    broker = EmbeddedBroker(log_path=tmp_path / "broker.log").start()
    try:
        assert _kill_restart_and_read(broker, "volatile") == []
    finally:
        broker.stop()


def test_storage_engine_reaches_the_broker_command_line(tmp_path: Path) -> None:
    broker = EmbeddedBroker(storage_engine="s3://elsewhere/", env={"AWS_ENDPOINT": "http://127.0.0.1:1"},
                            log_path=tmp_path / "broker.log")
    assert broker.storage_engine == "s3://elsewhere/" and broker.env["AWS_ENDPOINT"] == "http://127.0.0.1:1"
    with pytest.raises(Exception, match="did not accept|exited"):  # S3 unreachable: it must not come up
        broker.start(timeout=5)
    assert "s3" in (tmp_path / "broker.log").read_text(errors="replace").lower()


def _produce_small_batches(bootstrap: str, topic: str, n: int, tag: str, per_send: int = 40) -> list[bytes]:
    """``n`` records in rounds of ``per_send`` (each round acknowledged before the next): over 8 partitions
    that is one small record batch, one S3 object, per partition and round, as a worker's sends make them."""
    values = [f"{tag}-{i}".encode() for i in range(n)]
    for start in range(0, n, per_send):
        produce(bootstrap, topic, [(v, v) for v in values[start:start + per_send]])
    return values


TAIL_BUDGET_S = 120.0  # the tail's polls below together; alone they take some 3 s on 2 cores
# Tansu's S3 engine reads for about a fetch's max wait and answers with what it has: the tail's 100 ms
# answered every fetch empty on a starved machine, however long the tail polled (topic_io.reader).
MAX_WAIT_MS = 1000


def _poll_until(tail: TopicTail, n: int, deadline: float) -> list[ConsumerRecord]:
    """Poll ``tail`` until it returned ``n`` records or ``deadline`` (``time.monotonic()``) passed. Each poll goes
    on from the positions the last one kept, so a slow read costs more polls, not records: one poll is bounded
    (``POLL_TIMEOUT_S``) and a loaded machine can need several (beside ``make demo`` one poll read
    784 of 2,000)."""
    new: list[ConsumerRecord] = []
    while len(new) < n and time.monotonic() < deadline:
        new.extend(tail.poll())
    return new


def _short(what: str, new: list[ConsumerRecord], n: int, tail: TopicTail) -> str:
    return (f"{what}: {len(new)} of {n} records read within the {TAIL_BUDGET_S:.0f} s budget, positions "
            f"{tail.positions}, {len(tail.history)} polls that read or failed ({tail.unfinished} stopped at their "
            f"{POLL_TIMEOUT_S:.0f} s bound, {tail.errors} failed): {tail.history}")


def test_s3_reads_reach_the_end_a_slow_first_fetch_notwithstanding(tmp_path: Path) -> None:
    """With some 50 small batches per partition in S3, a fresh consumer's first fetch takes
    longer than the 300 ms the tail once took for "nothing more" (measured 0.5-0.7 s), and a fault run read back
    305 of 2,000 score records. A tail, from the beginning and from kept positions across a broker kill -9,
    and the full re-read must each reach the end the broker's fetches report, and find every record. Not
    within one poll: the tail's polls share one generous budget (one 30 s poll fell short under load)."""
    topic = "many-batches"
    with S3Server(tmp_path / "s3.log") as s3:
        broker = s3.broker(log_path=tmp_path / "broker.log").start()
        try:
            asyncio.run(ensure_topics(broker.bootstrap, [topic], 8))
            before = _produce_small_batches(broker.bootstrap, topic, 2000, "before")
            deadline = time.monotonic() + TAIL_BUDGET_S
            tail = TopicTail(broker.bootstrap, topic, fetch_max_wait_ms=MAX_WAIT_MS)
            first = _poll_until(tail, len(before), deadline)  # from the beginning
            assert sorted(r.value for r in first) == sorted(before), (
                _short("from the beginning", first, len(before), tail))
            left = deadline - time.monotonic()  # the restart and the sends below do not spend the budget
            broker.kill()
            broker.start()
            after = _produce_small_batches(broker.bootstrap, topic, 400, "after")
            new = _poll_until(tail, len(after), time.monotonic() + left)  # from the positions it kept
            assert sorted(r.value for r in new) == sorted(after), _short("from kept positions", new, len(after), tail)
            assert tail.errors == 0, _short("from kept positions", new, len(after), tail)
            full = read_to_end(broker.bootstrap, topic, fetch_max_wait_ms=MAX_WAIT_MS)
        finally:
            broker.stop()
    assert full.complete and sorted(r.value for r in full.records) == sorted(before + after), (
        f"full re-read: {len(full.records)} of {len(before) + len(after)} records, complete {full.complete}, "
        f"positions {full.position}, fetched ends {full.fetched_end}")
    assert full.position == full.fetched_end == tail.positions
