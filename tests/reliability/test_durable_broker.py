"""The durable embedded broker the broker-restart fault runs on: Tansu's S3 storage engine against a local
S3 server keeps acknowledged records through a kill -9; the in-memory default (the control) does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.runtime.broker import EmbeddedBroker
from tests.s3_server import S3Server
from tests.topic_io import TopicTail, produce

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
