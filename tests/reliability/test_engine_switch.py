"""Switching a running deployment from the faust engine to the checkpoint engine with conversations still open:
the faust worker scores the first conversations and holds the rest open when it stops (SIGTERM); the checkpoint
engine's worker takes the faust changelogs over and scores them when their last turns arrive. Every id scored once
(by score id), the judge's slice judged once and paid once, the exported totals and Prometheus's count equal to the
truth (no series reset at the switch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.fault_run import FaultRun, simulated, turn_events
from tests.support.accounting import SCORED

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.timeout(900)]
N = 300


def test_switching_from_faust_with_open_conversations_loses_and_repeats_nothing(broker: str, tmp_path: Path) -> None:
    convs = simulated(N, "switch", seed=43)
    done, still_open = convs[: N // 2], convs[N // 2:]
    heads = [r for c in still_open for r in turn_events(c)[:2]]  # two turns each: open at the switch
    tails = [r for c in still_open for r in turn_events(c)[2:]]
    with FaultRun("engine_switch", tmp_path, broker, idle_timeout_s=300.0) as run:
        run.expect([c.conversation_id for c in convs], SCORED)
        run.supervisor.start("a")
        run.produce([r for c in done for r in turn_events(c)] + heads)
        run.precondition("the faust worker scored the finished half", run.wait_accounted(0.5))
        run.supervisor.stop("a")
        worker = run.supervisor.workers["a"]
        worker.settings = worker.settings.model_copy(update={"engine": "checkpoint"})
        run.supervisor.start("a")
        run.produce(tails)
        t = run.finish().table
    assert all(t["preconditions"].values()), t["preconditions"]
    assert t["worker_crashes"] == [], t["worker_crashes"]
    assert (t["lost"], t["wrong_outcome"], t["copies_disagree"]) == (0, 0, 0), t["examples"]
    assert t["scored_once_by_score_id"] == t["expected_scored"] == N
    judge = t["judge"]
    assert judge["lost"] == 0 and judge["scored_once_by_score_id"] == judge["slice"], judge
    # judged again: at most the calls the stopping faust worker abandoned (its judge_concurrency)
    assert 0 <= judge["calls"] - judge["scored_once_by_score_id"] <= run.settings.judge_concurrency, judge
    assert t["exported_totals"]["series_differing"] == 0, t["exported_totals"]
    assert abs(t["prometheus"]["scraped_total"] - t["prometheus"]["truth"]) < 0.01, t["prometheus"]
    assert t["prometheus"]["resets"] == 0, t["prometheus"]
