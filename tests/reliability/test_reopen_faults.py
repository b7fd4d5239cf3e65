"""Returning users across kill -9 (the fault suite): 2,000 conversations, half sent as turn events and half whole,
a third of which come back after they were scored, once or twice (as turn events, or whole again with more
turns); the worker is SIGKILLed while the first and while the second returns are processed.
Every id must be scored at every revision by the distilled models (and by the judge on its hash slice), and
counted once per scorer by its latest revision: the exported totals, net of their retraction counters, equal the
truth computed from the latest revisions on the scores topic, and so does what Prometheus counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from monitor.tools.simulator.generate import SimConversation
from tests.reliability.fault_run import FaultRun, simulated, turn_events, whole
from tests.reliability.reopen_run import ReopenRun, come_back, come_back_whole
from tests.support.accounting import SCORED
from tests.support.topic_io import Record

N = 2000
pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.timeout(1500)]
DSAT = ["dsat.negative_feedback"]
WHOLE: set[str] = set()  # the conversations sent whole


@pytest.fixture(scope="module")
def checkpoint_reopen_kill_9(broker: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return reopen_kill_9_run(broker, tmp_path_factory.mktemp("reopen"))


def sent(conv: SimConversation) -> list[Record]:
    return [whole(conv)] if conv.conversation_id in WHOLE else turn_events(conv)


def returns(conv: SimConversation, times: int, truth: list[str]) -> list[Record]:
    if conv.conversation_id in WHOLE:
        return [come_back_whole(conv, times, truth)]
    return come_back(conv, times, truth)


def reopen_kill_9_run(broker: str, workdir: Path) -> dict[str, Any]:
    convs = simulated(N, "reopen", seed=54)
    WHOLE.update(c.conversation_id for c in convs[1::2])  # every other one, so both halves come back
    once, twice = convs[: N // 6], convs[N // 6: N // 3]
    back = {c.conversation_id: 1 for c in once} | {c.conversation_id: 2 for c in twice}
    with FaultRun("reopen_kill_9", workdir, broker, reopen_window_s=86_400.0) as run:  # the default, set: it needs it
        run.expect([c.conversation_id for c in convs], SCORED)
        r = ReopenRun(run, convs, back)
        run.supervisor.start("a")
        run.produce_in_chunks([e for c in convs for e in sent(c)], chunks=10, pace_s=0.5, at={})
        returning = once + twice
        run.precondition("every returning conversation scored before it comes back",
                         r.wait(lambda: r.reached("distilled", back, lambda _: 1)))

        def kill_after(revision: int) -> None:  # mid-stream: once the worker has scored some of this revision
            run.precondition(f"worker scoring revision {revision} before its kill",
                             r.wait(lambda: any(revision in revs for (s, _), revs in r.seen.items()
                                                if s == "distilled")))
            run.notes.setdefault("kills_at_score_records", []).append(len(run.scores.records))
            run.supervisor.kill("a")

        run.produce_in_chunks([e for c in returning for e in returns(c, 1, DSAT)], chunks=8, pace_s=1.0,
                              at={3: lambda: kill_after(2)})
        run.precondition("the twice-returning conversations' second revision scored before they come back again",
                         r.wait(lambda: r.reached("distilled", [c.conversation_id for c in twice], lambda _: 2)))
        run.produce_in_chunks([e for c in twice for e in returns(c, 2, [])], chunks=6, pace_s=1.0,
                              at={2: lambda: kill_after(3)})
        return r.table()


def test_the_fault_happened_as_planned(checkpoint_reopen_kill_9: dict[str, Any]) -> None:
    t = checkpoint_reopen_kill_9
    assert all(t["preconditions"].values()), t["preconditions"]
    assert t["worker_kills"] == 2 and t["worker_crashes"] == [] and t["complete"]


def test_every_revision_of_every_id_scored(checkpoint_reopen_kill_9: dict[str, Any]) -> None:
    t = checkpoint_reopen_kill_9
    assert t["revisions_wrong"] == {"distilled": 0, "llm": 0}, t["examples"]
    assert t["llm_outside_slice"] == 0


def test_exported_totals_count_each_latest_revision_once(checkpoint_reopen_kill_9: dict[str, Any]) -> None:
    t = checkpoint_reopen_kill_9
    assert t["exported"]["scored_net"] == {"distilled": N, "llm": t["judge_slice"]}
    assert t["exported"]["series_differing"] == 0, t["exported"]["differ"]


def test_prometheus_counts_each_latest_revision_once(checkpoint_reopen_kill_9: dict[str, Any]) -> None:
    t = checkpoint_reopen_kill_9
    assert t["prometheus"]["distilled"]["net"] == N
    assert t["prometheus"]["llm"]["net"] == t["judge_slice"]
    assert t["prometheus"]["distilled"]["retracted"] == t["revisions_expected"] - N
