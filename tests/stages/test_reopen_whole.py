"""Conversations sent whole (``type: conversation``) that come back: a later record holding more turns is the next
revision, one holding no more is a redelivery, past the window it is late; never a new conversation under the same
id, never counted twice."""

from __future__ import annotations

import orjson

from monitor.contracts.events import Conversation, EndEvent, TurnEvent
from monitor.stages import sessionize as ses
from monitor.stages.hotpath import Input
from tests.support.hot_path import hot_path, turn
from tests.support.memstore import MemStore

LIMITS = ses.Limits(max_turns=10, max_chars=1000, max_bytes=4096, max_metadata_bytes=300)
HOUR = 3600.0


def make(store: MemStore | None = None, window: float = 24 * HOUR, cap: int = 100) -> ses.Sessionizer:
    return ses.Sessionizer(store or MemStore(), LIMITS, idle_timeout_s=10.0, closed_retention_s=HOUR,
                           allowed_lateness_s=5.0, reopen_window_s=window, reopen_max=cap)


def conversation(n: int, cid: str = "w") -> Conversation:
    return Conversation.model_validate({"conversation_id": cid, "turns": [
        {"index": i, "role": "user" if i % 2 == 0 else "assistant", "text": f"t{i}"} for i in range(n)]})


def whole(n: int, cid: str = "w") -> bytes:
    return orjson.dumps(conversation(n, cid).model_dump(exclude_none=True))


def test_a_longer_record_within_the_window_is_the_next_revision() -> None:
    s = make()
    first, second, third = conversation(2), conversation(4), conversation(6)
    assert s.whole(first, 2, 0, now=1.0) == "ok" and s.take_revisions() == {}
    assert s.whole(second, 4, 0, now=2 * HOUR) == "ok"
    assert s.take_revisions() == {id(second): 2} and s.take_tally().reopened == 1
    assert s.whole(third, 6, 0, now=3 * HOUR) == "ok" and s.take_revisions() == {id(third): 3}
    assert s.closed["w"].revision == 3 and s.closed["w"].whole and "w" not in s.open


def test_a_record_with_no_more_turns_is_a_redelivery_and_changes_nothing() -> None:
    s = make()
    s.whole(conversation(4), 4, 0, now=1.0)
    before = s.closed["w"]
    assert s.whole(conversation(4), 4, 0, now=5.0) == "redelivered"
    assert s.whole(conversation(3), 3, 0, now=5.0) == "redelivered"
    assert s.closed["w"] == before and s.take_revisions() == {}


def test_past_the_window_or_with_reopening_off_a_longer_record_is_late() -> None:
    s = make()
    s.whole(conversation(2), 2, 0, now=1.0)
    assert s.whole(conversation(4), 4, 0, now=1.0 + 24 * HOUR + 1) == "late"
    assert "past the 24 h reopen window" in s.late_reason("w", 1.0 + 24 * HOUR + 1)
    off = make(window=0.0)
    off.whole(conversation(2), 2, 0, now=1.0)
    assert off.whole(conversation(4), 4, 0, now=2.0) == "late"
    assert "reopening is off" in off.late_reason("w", 2.0)


def test_turn_events_of_a_whole_conversation_are_redelivered_or_late_with_a_reason() -> None:
    s = make()
    s.whole(conversation(2), 2, 0, now=1.0)
    assert s.turn(_turn(1), 0, 2.0) == ("redelivered", [])
    assert s.turn(_turn(2), 0, 2.0) == ("late", [])
    assert "came as one record" in s.late_reason("w", 2.0)


def test_a_conversation_of_turn_events_continued_whole_drops_its_kept_turns() -> None:
    s = make()
    for i in range(2):
        s.turn(_turn(i), 0, 1.0)
    _, [closed] = s.end(EndEvent(type="end", conversation_id="w", timestamp=2.0, turn_count=2), 0, 1.0,
                        rekeyed=False)
    assert s.closed["w"].kept == (0, 1)
    longer = conversation(3)
    assert s.whole(longer, 3, 0, now=10.0) == "ok" and s.take_revisions() == {id(longer): 2}
    assert not any(k.startswith("t|") for k in s.store.data) and list(s.reopenable[0]) == ["w"]
    assert s.closed["w"].kept == () and s.closed["w"].whole


def test_past_the_partitions_reopen_cap_the_oldest_whole_conversation_is_late() -> None:
    """As for turn events: the revision ledger keeps what a revision counted only for the kept conversations, so
    one past the cap could not retract its last revision's counts."""
    s = make(cap=2)
    for cid in ("a", "b", "c"):
        s.whole(conversation(2, cid), 2, 0, now=1.0)
    assert list(s.reopenable[0]) == ["b", "c"] and s.closed["a"].kept is None
    assert s.whole(conversation(4, "a"), 4, 0, now=2.0) == "late"
    assert "no longer kept for reopening" in s.late_reason("a", 2.0, whole=True)
    assert s.whole(conversation(4, "b"), 4, 0, now=2.0) == "ok" and list(s.reopenable[0]) == ["c", "b"]


def test_the_whole_tombstone_survives_a_restore() -> None:
    store = MemStore()
    s = make(store)
    s.whole(conversation(2), 2, 0, now=1.0)
    s.whole(conversation(4), 4, 0, now=2.0)
    restored = make(store)
    restored.rebuild({0}, now=3.0)
    assert restored.closed["w"] == s.closed["w"]
    assert restored.whole(conversation(4), 4, 0, now=3.0) == "redelivered"
    longer = conversation(5)
    assert restored.whole(longer, 5, 0, now=3.0) == "ok" and restored.take_revisions() == {id(longer): 3}


def test_the_hot_path_scores_revisions_and_dead_letters_late_records_once() -> None:
    hot, metrics = hot_path()
    hot.sessions.reopen_window_s = 24 * HOUR
    first = hot.ingest([Input(b"w", whole(2), 0), Input(b"w", whole(2), 0)], now=1.0)  # a producer retry
    assert [len(c.turns) for c, _ in first.closed] == [2] and first.revisions == {}
    again = hot.ingest([Input(b"w", whole(4), 0)], now=2.0)
    [(revision, partition)] = again.closed
    assert len(revision.turns) == 4 and partition == 0 and again.revisions == {id(revision): 2}
    hot.sessions.reopen_window_s = 0.0  # reopening off: a longer record is late, never scored again
    late = hot.ingest([Input(b"w", whole(6), 0)], now=3.0)
    assert late.closed == [] and [d.reason for d in late.dead] == ["late_event"]
    assert b"conversation event: late (its conversation closed and reopening is off" in dict(
        late.dead[0].headers)["convmon-detail"]
    value = metrics.registry.get_sample_value
    assert value("convmon_redelivered_events_total", {"kind": "conversation"}) == 1
    assert value("convmon_late_events_total", {"kind": "conversation"}) == 1
    assert value("convmon_conversations_reopened_total") == 1
    assert value("convmon_events_total", {"kind": "conversation"}) == 4


def test_a_whole_record_for_a_conversation_open_as_turn_events_is_scored_as_it_came() -> None:
    hot, _ = hot_path()
    hot.ingest([Input(b"m", turn("m", 0), 0)], now=1.0)
    out = hot.ingest([Input(b"m", whole(2, "m"), 0)], now=1.5)
    assert [c.conversation_id for c, _ in out.closed] == ["m"] and "m" in hot.sessions.open


def _turn(i: int) -> TurnEvent:
    return TurnEvent(conversation_id="w", turn_index=i, role="user" if i % 2 == 0 else "assistant",
                         text=f"t{i}", timestamp=100.0 + i)
