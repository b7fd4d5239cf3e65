"""The group refuses one of the writer's offset commits (the broker answers IllegalGeneration mid-stream): the worker
stays up, drops its partitions' state, takes the group's next assignment and restores it from the committed changelog.
Every id scored once (by score id), the judge's slice judged once, and every exported total and Prometheus's count
equal to the truth: the refused batch's state changes count once, from its records read again."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.runtime.scrape import total
from tests.reliability.fault_run import FaultRun, assert_exact, simulated, turn_events
from tests.support.accounting import SCORED

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.timeout(900)]
N = 400


def test_a_refused_commit_drops_the_state_and_the_next_assignment_restores_it_exactly(broker: str,
                                                                                     tmp_path: Path) -> None:
    convs = simulated(N, "refused", seed=43)
    mark = tmp_path / "refused"
    with FaultRun("checkpoint_commit_refused", tmp_path, broker) as run:
        run.expect([c.conversation_id for c in convs], SCORED)
        worker = run.supervisor.workers["a"]
        worker.module = "tests.engine.refused_commit_worker"
        worker.extra_env = {"REFUSE_AT": "3", "REFUSE_MARK": str(mark)}
        run.supervisor.start("a")
        run.produce_in_chunks([r for c in convs for r in turn_events(c)], chunks=10, pace_s=0.5, at={})
        t = run.finish().table
        refused = total(worker.samples(), "convmon_offset_commits_refused_total")
        log = worker.log_path.read_text(errors="replace")
    assert mark.read_text() == "refused", "the commit was not refused"
    assert refused == 1, refused
    assert log.count("the group refused the offset commit: IllegalGenerationError") == 1
    assert t["worker_crashes"] == [] and t["agent_crashes"] == 0, t["worker_crashes"]
    assert_exact(t, N)
