"""A PostgreSQL outage logs one readable warning per retry, with the store's password masked.

Before the fix the credential scrubber set ``record.args = None``; the formatter the worker then used turned that
into ``(None,)`` and every retry printed a ~190-line ``--- Logging error ---`` block instead of the warning. Here
the root logger is configured as `convmon worker` configures it (monitor/runtime/worker.py).
"""

from __future__ import annotations

import asyncio
import io
import logging
import socket
from collections.abc import Iterator

import orjson
import pytest
from prometheus_client import CollectorRegistry

from distill.store import LabelStore
from monitor.contracts.metrics import Metrics
from monitor.judge.logsafe import install_log_safety
from monitor.runtime.worker import LOG_FORMAT
from monitor.stages.labels import LabelSink
from tests.reliability.pg import label_message

PASSWORD = "pg-Xy7%3Dnever-log-me"  # a URL-escaped '=' too: the '%3D' that broke the formatter
RETRIES = 3


class _Stop(Exception):
    pass


@pytest.fixture
def worker_logging() -> Iterator[io.StringIO]:
    """The worker's logging: log safety plus its format on the root logger."""
    factory = logging.getLogRecordFactory()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    level = root.level
    install_log_safety()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)
    logging.setLogRecordFactory(factory)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_outage_logs_one_masked_line_per_retry(worker_logging: io.StringIO,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    url = (f"postgresql+psycopg://postgres:{PASSWORD}@127.0.0.1:{_closed_port()}/test"
           "?options=-csearch_path%3Dpublic&connect_timeout=2")
    store = LabelStore(url)  # PostgreSQL is not listening there: every connect is refused
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == RETRIES:
            raise _Stop

    sink = LabelSink(store.upsert_raw, Metrics(CollectorRegistry()), sleep=sleep)
    try:
        with pytest.raises(_Stop):
            asyncio.run(asyncio.wait_for(sink.store([(b"c", orjson.dumps(label_message("c")))]), 60))
    finally:
        store.close()
    logged = worker_logging.getvalue()
    stderr = capsys.readouterr().err
    assert "Logging error" not in stderr and "Logging error" not in logged
    retries = [line for line in logged.splitlines() if "label store write failed" in line]
    assert len(retries) == RETRIES, logged
    assert "retry in 0.5s" in retries[0] and "retry in 2.0s" in retries[2]
    assert all("Connection refused" in line and "postgresql+psycopg://***@127.0.0.1" in line for line in retries)
    assert all(line.startswith("WARNING ") for line in logged.splitlines()), logged  # one line per record
    assert PASSWORD not in logged + stderr and "never-log-me" not in logged + stderr
