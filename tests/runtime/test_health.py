"""/healthz and /readyz: the worker's probes, unit-tested on a fake clock and against real workers."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import orjson
import pytest

from monitor.contracts.rubric_set import load_rubric_set
from monitor.runtime.health import Health
from monitor.runtime.scrape import total
from monitor.tools.simulator.generate import ConversationGenerator
from tests.support.topic_io import produce
from tests.support.workers import WorkerProcess, wait_until


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_liveness_needs_a_recent_tick_and_readiness_also_the_group() -> None:
    clock = Clock()
    health = Health(stall_s=5.0, clock=clock)
    assert health.live() == (False, "starting: the event loop has not ticked yet")
    health.tick()
    assert health.live()[0] and not health.ready()[0]
    assert health.ready() == (False, "not ready: has not joined the consumer group yet")
    health.joined = True
    assert health.ready()[0]
    clock.t += 5.5  # no tick for longer than stall_s: both fail, naming the stall
    assert health.live() == (False, "stalled: the event loop last ticked 6s ago (health_stall_s=5)")
    assert health.ready()[0] is False and health.ready()[1].startswith("stalled")
    health.tick()
    assert health.live()[0] and health.ready()[0]


def probe(worker: WorkerProcess, path: str) -> tuple[int, str]:
    response = httpx.get(f"http://127.0.0.1:{worker.port}{path}", timeout=5.0)
    return response.status_code, response.text


def assigned(worker: WorkerProcess) -> int | None:
    """Input partitions the worker owns, from its /readyz text; None while it is not ready."""
    status, text = probe(worker, "/readyz")
    match = re.search(r"\(input partitions assigned: (\d+)\)", text)
    return int(match.group(1)) if status == 200 and match else None


@pytest.mark.integration
def test_workers_are_ready_once_joined_even_an_idle_one(broker: str, make_settings, tmp_path: Path) -> None:
    """One partition, two workers: the second member of the group owns nothing and is still ready; when the
    owner leaves, the idle one takes the partitions over and processes what arrives."""
    settings = make_settings(broker_url=f"kafka://{broker}", topic_partitions=1)
    a, b = WorkerProcess(settings, tmp_path / "a.log"), WorkerProcess(settings, tmp_path / "b.log")
    try:
        a.start()
        wait_until(lambda: probe(a, "/readyz")[0] == 200, 60, message="the first worker to join")
        assert probe(a, "/healthz")[0] == 200
        assert "(input partitions assigned: 1)" in probe(a, "/readyz")[1]  # the input's only (not every topic's)
        b.start()
        assert probe(b, "/metrics")[0] == 200
        wait_until(lambda: probe(b, "/readyz")[0] == 200, 60, message=f"the second worker to join ({b.log()})")
        wait_until(lambda: 0 in (assigned(a), assigned(b)), 30,
                   message=f"one member idle: a={probe(a, '/readyz')[1]!r} b={probe(b, '/readyz')[1]!r}")
        assert probe(a, "/readyz")[0] == 200 and probe(b, "/healthz")[0] == 200
        assert "convmon_events_total" in probe(b, "/metrics")[1]  # /metrics is unchanged beside them
        owner, idle = (a, b) if assigned(b) == 0 else (b, a)
        assert assigned(owner) == 1
        owner.stop()  # scale in: the idle member takes every partition over
        wait_until(lambda: assigned(idle) == 1, 60, message=f"the idle worker to take over ({idle.log()})")
        rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
        sim = ConversationGenerator(rubric, seed=5).generate("scale-in-1", time.time(), end_event=False)
        produce(broker, settings.topic("events"), [(b"scale-in-1", orjson.dumps(e)) for e in sim.events])
        wait_until(lambda: total(idle.samples(), "convmon_events_total", kind="turn") == len(sim.events), 60,
                   message=f"the worker that took over to consume the turns ({idle.log()})")
    finally:
        a.stop()
        b.stop()


@pytest.mark.integration
def test_a_stalled_event_loop_fails_liveness_and_recovers(broker: str, make_settings, tmp_path: Path) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", health_stall_s=2.0)
    trigger = tmp_path / "stall"
    env = {"STALL_TRIGGER": str(trigger), "STALL_S": "8"}
    with WorkerProcess(settings, tmp_path / "w.log", module="tests.runtime.stall_worker", extra_env=env) as w:
        wait_until(lambda: probe(w, "/readyz")[0] == 200, 60, message="the worker to join")
        trigger.touch()
        wait_until(lambda: probe(w, "/healthz")[0] == 503, 15, interval=0.2, message="liveness to fail")
        status, text = probe(w, "/healthz")
        assert status == 503 and text.startswith("stalled: the event loop last ticked"), text
        assert probe(w, "/readyz")[0] == 503
        wait_until(lambda: probe(w, "/healthz")[0] == 200, 30, message="liveness back after the stall")
        assert w.alive()
