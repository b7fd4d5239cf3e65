"""The checkpoint engine killed (os._exit) right after each step of one checkpoint (after the outputs, the
changelog, the flush, and the offset commit, i.e. before the export), then restarted by its supervisor: every id
scored once (by score id), the judge's slice judged once, and every exported total and Prometheus's count equal to
the truth. The crash falls on the third checkpoint that produced score records."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.fault_run import FaultRun, assert_exact, simulated, turn_events
from tests.support.accounting import SCORED

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.timeout(900)]
N = 400


@pytest.mark.parametrize("step", ["produce", "log_state", "flush", "commit_offsets"])
def test_a_kill_after_each_checkpoint_step_recovers_to_exact_counts(broker: str, tmp_path: Path, step: str) -> None:
    convs = simulated(N, f"cp-{step}", seed=41)
    mark = tmp_path / "crashed"
    with FaultRun(f"checkpoint_crash_{step}", tmp_path, broker) as run:
        run.expect([c.conversation_id for c in convs], SCORED)
        worker = run.supervisor.workers["a"]
        worker.module = "tests.engine.crash_worker"
        worker.extra_env = {"CRASH_STEP": step, "CRASH_AT": "3", "CRASH_MARK": str(mark)}
        run.supervisor.start("a")
        run.produce_in_chunks([r for c in convs for r in turn_events(c)], chunks=10, pace_s=0.5, at={})
        t = run.finish().table
    assert mark.read_text() == step, "the worker did not crash at the planned step"
    assert [e["code"] for e in t["worker_crashes"]] == [9], t["worker_crashes"]
    assert_exact(t, N)
