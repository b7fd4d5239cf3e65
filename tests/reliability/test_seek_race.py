"""A backlog the fetcher could deliver while a new owner looks up its committed offsets is processed once, not
committed over.

The writer pauses newly assigned partitions, reads the group's committed offsets, restores their state, seeks and
only then resumes them. Here the offset lookup is slowed by 3 s (tests/reliability/slow_seek_worker.py, as when a
loaded broker answers OffsetFetch slowly) when a worker takes over committed partitions with a backlog and more
arriving. Every id must be scored, the worker must read to the end, and no gap may be recorded. (On the faust
engine a backlog delivered during the seek was committed over: 205-420 of 2,000 conversations lost in the kill -9
fault before it was fixed.)
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.contracts.rubric_set import load_rubric_set
from monitor.runtime.topics import create_topics
from tests.reliability.fault_run import simulated, whole
from tests.support.accounting import SCORED, Ledger
from tests.support.model_fixtures import publish_distilled_model
from tests.support.readback import read_to_end
from tests.support.topic_io import produce
from tests.support.workers import WorkerProcess, wait_until

N = 2000
FIRST, BACKLOG, CHUNK = 400, 400, 60
pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.timeout(300)]


def caught_up(worker: WorkerProcess, topic: str) -> bool:
    """The worker reports its lag on ``topic`` and it is 0 (read to the end; processing may still be going on)."""
    lags = [v for n, labels, v in worker.samples() if n == "convmon_consumer_lag_messages" and labels["topic"] == topic]
    return lags == [0.0]


def ready(worker: WorkerProcess) -> None:
    """The worker restored its partitions and reads them (/readyz): the scores' quiet period starts after that."""
    wait_until(lambda: httpx.get(worker.url.replace("/metrics", "/readyz"), timeout=5).status_code == 200, 120,
               message=f"the worker to be ready ({worker.log_path})")


def scored_when_settled(ledger: Ledger, broker: str, topic: str, quiet_s: float = 15.0) -> dict[str, Any]:
    """The per-id table once every id is scored, or once ``topic`` has not grown for ``quiet_s``."""
    seen, since = -1, time.monotonic()
    while True:
        fresh = Ledger(dict(ledger.expect))
        fresh.add_scores(read_to_end(broker, topic).records)
        table = fresh.table()
        if table["lost"] == 0 or time.monotonic() - since > quiet_s:
            return table
        if table["lost"] != seen:
            seen, since = table["lost"], time.monotonic()
        time.sleep(1.0)


def prepared(broker: str, make_settings: Any, prefix: str, seed: int) -> tuple[Any, list[Any], Ledger, Ledger]:
    """Settings, a model and the topics; N whole conversations; the ledgers of all of them and of the first
    FIRST."""
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=0.0, registry_poll_s=1.0)
    publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
    asyncio.run(create_topics(settings))
    convs = simulated(N, prefix, seed=seed)
    ledger = Ledger(dict.fromkeys((c.conversation_id for c in convs), SCORED))
    first = Ledger(dict.fromkeys((c.conversation_id for c in convs[:FIRST]), SCORED))
    return settings, [whole(c) for c in convs], ledger, first


def test_a_backlog_delivered_during_a_slow_seek_is_scored(broker: str, make_settings, tmp_path: Path) -> None:
    settings, records, ledger, first = prepared(broker, make_settings, "seek", seed=31)
    with WorkerProcess(settings, tmp_path / "first.log") as w0:  # commits offsets: the seek has somewhere to go back to
        ready(w0)
        produce(broker, settings.topic("events"), records[:FIRST])
        assert scored_when_settled(first, broker, settings.topic("scores"))["lost"] == 0
    produce(broker, settings.topic("events"), records[FIRST:FIRST + BACKLOG])  # what the next assignment finds
    with WorkerProcess(settings, tmp_path / "w.log", module="tests.reliability.slow_seek_worker",
                       extra_env={"SEEK_DELAY_S": "3"}) as w:
        for start in range(FIRST + BACKLOG, N, CHUNK):  # and more arriving while it seeks
            produce(broker, settings.topic("events"), records[start:start + CHUNK])
            time.sleep(0.25)
        deadline = time.monotonic() + 90
        while not (read := caught_up(w, settings.topic("events"))) and time.monotonic() < deadline:
            time.sleep(1.0)
        table = scored_when_settled(ledger, broker, settings.topic("scores"))
        lag = [v for n, labels, v in w.samples() if n == "convmon_consumer_lag_messages"
               and labels["topic"] == settings.topic("events")]
    assert (read, table["lost"]) == (True, 0), (f"events lag {lag}", table["examples"]["lost"])
    assert table["scored_once"] + table["double_counted"] == N


def test_a_backlog_fetched_during_the_seek_with_nothing_committed_is_scored(broker: str, make_settings,
                                                                           tmp_path: Path) -> None:
    """A changelog to restore but no input offset committed (a worker killed before its first commit: on the
    faust engine the CI kill -9 runs of 2026-11-27 lost 350 and 600 of 2,000 ids this way). The changelog records
    carry offsets the group never committed, so the successor skips them and reads the input from the start.
    Every id must be scored and the worker must read to the end, with no input after the backlog."""
    settings, records, ledger, first = prepared(broker, make_settings, "fresh", seed=32)
    with WorkerProcess(settings, tmp_path / "first.log", module="tests.reliability.slow_seek_worker",
                       extra_env={"SEEK_DELAY_S": "0", "NO_OFFSET_COMMITS": "1"}) as w0:  # a changelog, no offsets
        ready(w0)
        produce(broker, settings.topic("events"), records[:FIRST])
        assert scored_when_settled(first, broker, settings.topic("scores"))["lost"] == 0
    produce(broker, settings.topic("events"), records[FIRST:])
    with WorkerProcess(settings, tmp_path / "w.log", module="tests.reliability.slow_seek_worker",
                       extra_env={"SEEK_DELAY_S": "3"}) as w:
        deadline = time.monotonic() + 90
        while not (read := caught_up(w, settings.topic("events"))) and time.monotonic() < deadline:
            time.sleep(1.0)
        table = scored_when_settled(ledger, broker, settings.topic("scores"))
    assert (read, table["lost"]) == (True, 0), table["examples"]["lost"]
