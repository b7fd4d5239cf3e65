"""Reopening a scored conversation: a later turn or end within the reopen window opens the next revision, holding
the whole conversation so far; past the window it is a late event; the state is bounded and survives a restore."""

from __future__ import annotations

from monitor.contracts.events import EndEvent, Feedback, TurnEvent
from monitor.stages import sessionize as ses
from tests.support.memstore import MemStore  # values through JSON, as the changelog carries them

LIMITS = ses.Limits(max_turns=10, max_chars=1000, max_bytes=4096, max_metadata_bytes=300)
HOUR = 3600.0


def make(store: MemStore | None = None, window: float = 24 * HOUR, cap: int = 100) -> ses.Sessionizer:
    return ses.Sessionizer(store or MemStore(), LIMITS, idle_timeout_s=10.0, closed_retention_s=HOUR,
                           allowed_lateness_s=5.0, reopen_window_s=window, reopen_max=cap)


def t(i: int, cid: str = "c", text: str = "", **kw: object) -> TurnEvent:
    return TurnEvent(conversation_id=cid, turn_index=i, role="user" if i % 2 == 0 else "assistant",
                     text=text or f"t{i}", timestamp=100.0 + i, **kw)


def end(cid: str = "c", **kw: object) -> EndEvent:
    return EndEvent(type="end", conversation_id=cid, timestamp=200.0, **kw)


def scored(s: ses.Sessionizer, cid: str = "c", n: int = 2, now: float = 1.0) -> None:
    for i in range(n):
        s.turn(t(i, cid), 0, now)
    _, [conversation] = s.end(end(cid, turn_count=n, metadata={"app": "web"}, feedback=Feedback(thumbs="up")), 0,
                              now, rekeyed=False)
    assert s.take_revisions() == {}  # a first revision is not listed


def test_a_turn_within_the_window_opens_the_next_revision_with_the_whole_conversation() -> None:
    s = make()
    scored(s)
    assert s.turn(t(2, text="this is still wrong"), 0, now=2 * HOUR) == ("ok", [])
    assert s.open["c"].revision == 2 and "c" not in s.closed and s.take_tally().reopened == 1
    # an end saying 4 turns: the revision waits for the fourth, then idles out with three
    assert s.end(end(turn_count=4, feedback=Feedback(thumbs="down")), 0, 2 * HOUR, rekeyed=False) == ("pending", [])
    [closed] = s.sweep(2 * HOUR + 20, {0}).conversations
    assert [x.text for x in closed.turns] == ["t0", "t1", "this is still wrong"]
    assert closed.metadata == {"app": "web"}  # the first end's metadata is kept
    assert closed.feedback == Feedback(thumbs="down")  # the later end's feedback wins
    assert s.take_revisions() == {id(closed): 2} and s.closed["c"].revision == 2


def test_a_reopened_revision_closes_on_its_own_end_and_a_third_revision_follows() -> None:
    s = make()
    scored(s)
    s.turn(t(2), 0, now=10.0)
    outcome, [second] = s.end(end(turn_count=3), 0, 11.0, rekeyed=False)
    assert outcome == "ok" and [x.index for x in second.turns] == [0, 1, 2]
    assert s.take_revisions() == {id(second): 2}
    s.turn(t(3), 0, now=20.0)
    _, [third] = s.end(end(turn_count=4), 0, 21.0, rekeyed=False)
    assert [x.index for x in third.turns] == [0, 1, 2, 3] and s.take_revisions() == {id(third): 3}


def test_redelivered_events_do_not_reopen() -> None:
    s = make()
    scored(s)
    assert s.turn(t(1), 0, now=5.0) == ("redelivered", [])
    assert s.end(end(turn_count=2), 0, 5.0, rekeyed=False) == ("redelivered", [])
    assert "c" in s.closed and s.take_tally().reopened == 0


def test_past_the_window_a_turn_is_late_with_its_reason_and_never_a_new_conversation() -> None:
    s = make()
    scored(s)
    s.sweep(25 * HOUR, {0})  # past the window: no longer reopenable, the tombstone stays for closed_retention_s
    assert s.closed["c"].kept is None and not any(k.startswith("t|") for k in s.store.data)
    assert s.turn(t(5), 0, now=25 * HOUR) == ("late", [])
    assert "past the 24 h reopen window" in s.late_reason("c", 25 * HOUR)
    assert "c" not in s.open


def test_reopening_off_keeps_the_behaviour_of_before() -> None:
    s = make(window=0.0)
    scored(s)
    assert set(s.store.data) == {"s|c"}  # turns deleted at the close
    assert s.turn(t(2), 0, now=2.0) == ("late", [])
    assert "reopening is off" in s.late_reason("c", 2.0)
    s.sweep(HOUR + 10, {0})
    assert "c" not in s.closed


def test_at_most_the_cap_stay_reopenable_per_partition() -> None:
    s = make(cap=3)
    for k in range(5):
        scored(s, cid=f"c{k}", now=1.0 + k)
    assert list(s.reopenable[0]) == ["c2", "c3", "c4"]
    assert s.closed["c0"].kept is None and not any(k.startswith("t|c0|") for k in s.store.data)
    assert s.turn(t(2, "c0"), 0, now=10.0) == ("late", [])
    assert "REOPEN_MAX_CONVERSATIONS" in s.late_reason("c0", 10.0)
    assert s.turn(t(2, "c4"), 0, now=10.0) == ("ok", [])


def test_the_reopen_state_and_revisions_survive_a_restore() -> None:
    store = MemStore()
    s = make(store)
    scored(s)
    s.turn(t(2), 0, now=10.0)
    s.end(end(turn_count=3), 0, 11.0, rekeyed=False)  # revision 2 closed
    again = make(store)
    again.rebuild({0}, now=12.0)
    assert again.closed["c"].revision == 2 and list(again.reopenable[0]) == ["c"]
    again.turn(t(3), 0, now=13.0)  # revision 3 open ...
    restored = make(store)
    restored.rebuild({0}, now=14.0)
    assert restored.open["c"].revision == 3  # ... and still revision 3 after another restore
    _, [third] = restored.end(end(turn_count=4), 0, 15.0, rekeyed=False)
    assert [x.index for x in third.turns] == [0, 1, 2, 3] and third.metadata == {"app": "web"}
    assert restored.take_revisions() == {id(third): 3}
