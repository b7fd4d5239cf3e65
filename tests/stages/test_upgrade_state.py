"""A worker of this release takes over the state a worker of 9858d22 (the release before the read-only input
topic) left in the ``sessions`` and ``scored`` changelogs: open conversations go on where they stopped, finished
ones are not counted again, and the partition totals go on from their restored values (docs/deployment.md, "Upgrades").

tests/data/upgrade-state-9858d22.json was written by tests/support/upgrade_state.py run in a checkout of 9858d22
(its docstring says how); the same script run here must give the same state but for this release's format
changes, so a format change shows up here first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from monitor.contracts.settings import REPO_ROOT
from monitor.engine.upgrade import settled
from monitor.stages.hotpath import Input
from tests.support.memstore import MemStore
from tests.support.upgrade_state import T0, durable, end, exported, main, record, turn, worker

OLD = REPO_ROOT / "tests" / "data" / "upgrade-state-9858d22.json"


def restored(state: dict[str, Any]) -> tuple[MemStore, MemStore]:
    sessions, counts = MemStore(), MemStore()
    sessions.data, counts.data = dict(state["sessions"]), settled(state["scored"])  # as the take-over reads it
    return sessions, counts


def test_the_previous_release_state_is_taken_over_without_loss_or_double_count() -> None:
    state = orjson.loads(OLD.read_bytes())
    assert state["commit"] == "9858d22"
    hot, metrics = worker(*restored(state))
    assert sorted(hot.sessions.open) == state["open"] == ["open-a", "open-cut"]
    assert metrics.registry.get_sample_value("convmon_open_conversations") == 2
    assert exported(hot) == state["exported"]  # the totals Prometheus saw from the old worker, no more, no less
    out = hot.ingest([Input(b"open-a", turn("open-a", 2), 0, timestamp=T0 + 2),
                      Input(b"open-a", end("open-a"), 0, timestamp=T0 + 30),
                      Input(b"open-cut", end("open-cut"), 1, timestamp=T0 + 30),
                      Input(b"done-b", end("done-b"), 1, timestamp=T0 + 30)], now=T0 + 50)  # done-b: re-delivered
    closed = {c.conversation_id: c for c, _ in out.closed}
    assert sorted(closed) == ["open-a", "open-cut"] and not out.dead
    assert [t.index for t in closed["open-a"].turns] == [0, 1, 2]  # the old worker's turns and the new one's
    assert [t.index for t in closed["open-cut"].turns] == [0, 1, 2] and closed["open-cut"].truncated
    assert metrics.registry.get_sample_value("convmon_redelivered_events_total", {"kind": "end"}) == 1
    before = dict(hot.totals.exported())
    hot.count([record("done-b"), record("done-c", "llm")], {"done-b": 1, "done-c": 0}, now=T0 + 51)  # again
    durable(hot)
    assert hot.totals.exported() == before  # already counted by the old worker: duplicates, not counted
    assert metrics.registry.get_sample_value("convmon_duplicate_scores_total", {"scorer": "distilled"}) == 1
    hot.count([record("open-a")], {"open-a": 0}, now=T0 + 52)
    durable(hot)
    scored = ("scored", ("distilled",))
    assert hot.totals.exported()[0][scored] == before[0][scored] + 1


def test_this_release_writes_the_same_state_but_for_its_listed_format_changes(tmp_path: Path) -> None:
    main(tmp_path / "now.json", "HEAD")
    now, old = orjson.loads((tmp_path / "now.json").read_bytes()), orjson.loads(OLD.read_bytes())
    assert old["sessions"].pop("s|open-cut") == {"p": 1, "tr": 1}  # before: truncated or not
    assert now["sessions"].pop("s|open-cut") == {"p": 1, "tr": ["max_turns"]}  # now: the caps that cut it
    old["scored"] = settled(old["scored"])  # since the checkpoint engine: no batch numbers, no commit records
    for key in ("sessions", "scored", "open", "exported"):
        assert now[key] == old[key], key

