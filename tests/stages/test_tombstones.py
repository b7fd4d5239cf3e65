"""Finished conversations remembered (their tombstones): for the reopen window and the closed retention, at most
``closed_max`` per partition, the oldest forgotten first; what the sweep and a restore do with them."""

from __future__ import annotations

from monitor.contracts.events import EndEvent, TurnEvent
from monitor.stages import sessionize as ses
from monitor.stages.hotpath import Input
from tests.support.hot_path import end, hot_path, turn
from tests.support.memstore import MemStore

LIMITS = ses.Limits(max_turns=10, max_chars=1000, max_bytes=4096, max_metadata_bytes=300)
HOUR = 3600.0


def make(store: MemStore | None = None, closed_max: int = 3) -> ses.Sessionizer:
    return ses.Sessionizer(store or MemStore(), LIMITS, idle_timeout_s=10.0, closed_retention_s=HOUR,
                           allowed_lateness_s=5.0, reopen_window_s=2 * HOUR, reopen_max=100, closed_max=closed_max)


def scored(s: ses.Sessionizer, cid: str, now: float, partition: int = 0) -> None:
    s.turn(TurnEvent(conversation_id=cid, turn_index=0, role="user", text="hi", timestamp=now), partition, now)
    _, [_] = s.end(EndEvent(type="end", conversation_id=cid, timestamp=now, turn_count=1), partition, now,
                   rekeyed=False)


def test_past_the_cap_the_oldest_is_forgotten_with_its_kept_turns() -> None:
    s = make()
    for i, cid in enumerate("abcde"):
        scored(s, cid, now=float(i))
    assert sorted(s.closed) == ["c", "d", "e"] and list(s.finished[0]) == ["c", "d", "e"]
    assert list(s.reopenable[0]) == ["c", "d", "e"] and s.take_tally().forgotten == 2
    assert not any(k in s.store.data for k in ("s|a", "t|a|0", "s|b", "t|b|0"))
    # a forgotten conversation's later turn starts a new one under its id (what the cap costs, counted)
    assert s.turn(TurnEvent(conversation_id="a", turn_index=1, role="user", text="back", timestamp=9.0), 0,
                  9.0) == ("ok", [])
    assert s.open["a"].revision == 1


def test_the_cap_is_per_partition() -> None:
    s = make()
    for i, cid in enumerate("abc"):
        scored(s, cid, now=float(i), partition=0)
    for i, cid in enumerate("xyz"):
        scored(s, cid, now=float(i), partition=1)
    assert len(s.closed) == 6 and s.take_tally().forgotten == 0


def test_a_sweep_unkeeps_past_the_window_and_forgets_past_the_retention_oldest_first() -> None:
    s = make(closed_max=100)
    scored(s, "old", now=0.0)
    scored(s, "new", now=HOUR)
    s.sweep(2 * HOUR + 1, {0})
    assert s.closed["old"].kept is None and s.closed["new"].kept is not None
    s.sweep(3 * HOUR + 1, {0})
    assert "old" not in s.closed and "s|old" not in s.store.data and s.closed["new"].kept is None
    assert list(s.finished[0]) == ["new"] and s.take_tally().forgotten == 0  # expired, not forgotten early
    s.sweep(4 * HOUR + 1, {0})
    assert s.closed == {} and list(s.finished[0]) == []


def test_a_reopened_conversation_leaves_the_order_and_comes_back_as_the_newest() -> None:
    s = make()
    for i, cid in enumerate("abc"):
        scored(s, cid, now=float(i))
    s.turn(TurnEvent(conversation_id="a", turn_index=1, role="user", text="back", timestamp=5.0), 0, 5.0)
    assert list(s.finished[0]) == ["b", "c"]
    s.end(EndEvent(type="end", conversation_id="a", timestamp=6.0, turn_count=2), 0, 6.0, rekeyed=False)
    assert list(s.finished[0]) == ["b", "c", "a"]
    scored(s, "d", now=7.0)
    assert sorted(s.closed) == ["a", "c", "d"]


def test_a_restore_rebuilds_the_order_by_close_time() -> None:
    store = MemStore()
    s = make(store)
    for i, cid in enumerate("cab"):
        scored(s, cid, now=float(i))
    restored = make(store)
    restored.rebuild({0}, now=10.0)
    assert list(restored.finished[0]) == ["c", "a", "b"]
    scored(restored, "d", now=11.0)
    assert sorted(restored.closed) == ["a", "b", "d"]


def test_the_hot_path_exports_the_tombstones_and_those_forgotten() -> None:
    hot, metrics = hot_path()
    hot.sessions.closed_max = 2
    hot.ingest([Input(c.encode(), v, 0) for c in "abc" for v in (turn(c, 0), end(c, turn_count=1))], now=1.0)
    value = metrics.registry.get_sample_value
    assert value("convmon_closed_conversations") == 2
    assert value("convmon_closed_conversations_forgotten_total") == 1
