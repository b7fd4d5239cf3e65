from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contracts.events import EndEvent, Feedback, TurnEvent
from monitor.stages import sessionize as ses

LIMITS = ses.Limits(max_turns=10, max_chars=1000)


def t(i: int, role: str = "user", text: str = "hello", cid: str = "c") -> TurnEvent:
    return TurnEvent(conversation_id=cid, turn_index=i, role=role, text=text, timestamp=100.0 + i)


def end(cid: str = "c", **kw: object) -> EndEvent:
    return EndEvent(type="end", conversation_id=cid, timestamp=200.0, **kw)


def test_out_of_order_turns_are_emitted_in_order_on_end() -> None:
    state = None
    for i in (2, 0, 1):
        state, outcome = ses.apply_turn(state, t(i, text=f"t{i}"), LIMITS, now=1.0)
        assert outcome == "ok"
    state, conv, outcome = ses.apply_end(state, end(feedback=Feedback(thumbs="up")), now=2.0)
    assert outcome == "ok" and conv is not None
    assert [turn.text for turn in conv.turns] == ["t0", "t1", "t2"]
    assert conv.feedback == Feedback(thumbs="up") and conv.end_reason == "end"
    assert ses.is_closed(state)


def test_duplicate_and_late_events_are_recognised_after_close() -> None:
    state, _ = ses.apply_turn(None, t(0), LIMITS, now=1.0)
    state, conv, _ = ses.apply_end(state, end(), now=2.0)
    assert conv is not None
    _, conv2, outcome = ses.apply_end(state, end(), now=3.0)
    assert conv2 is None and outcome == "late"
    _, outcome = ses.apply_turn(state, t(5), LIMITS, now=3.0)
    assert outcome == "late"


def test_end_for_unknown_conversation_emits_nothing() -> None:
    state, conv, outcome = ses.apply_end(None, end("nobody"), now=1.0)
    assert (state, conv, outcome) == (None, None, "unknown_conversation")


def test_repeated_turn_index_replaces_text() -> None:
    state, _ = ses.apply_turn(None, t(0, text="first"), LIMITS, now=1.0)
    state, outcome = ses.apply_turn(state, t(0, text="retry"), LIMITS, now=1.0)
    assert outcome == "replaced" and state["turns"]["0"]["text"] == "retry"


def test_huge_conversations_are_bounded_and_marked() -> None:
    state = None
    for i in range(50):
        state, _ = ses.apply_turn(state, t(i, text="x" * 100), LIMITS, now=1.0)
    assert len(state["turns"]) <= LIMITS.max_turns
    assert sum(len(v["text"]) for v in state["turns"].values()) <= LIMITS.max_chars
    conv = ses.finish("c", state, "idle", now=2.0)
    assert conv.truncated and conv.turns[0].index == 0 and conv.turns[-1].index == 49


def test_a_single_huge_turn_is_cut() -> None:
    state, outcome = ses.apply_turn(None, t(0, text="y" * 10_000), LIMITS, now=1.0)
    assert outcome == "truncated" and state["turns"]["0"]["text"].endswith(ses.TRUNCATION_MARK)


def test_sweep_finishes_idle_and_forgets_old_tombstones() -> None:
    idle, _ = ses.apply_turn(None, t(0, cid="idle"), LIMITS, now=0.0)
    fresh, _ = ses.apply_turn(None, t(0, cid="fresh"), LIMITS, now=95.0)
    items = [("idle", idle), ("fresh", fresh), ("old", ses.close(0.0)), ("recent", ses.close(90.0))]
    finished, to_close, to_delete = ses.sweep(items, 100.0, idle_timeout_s=10.0, closed_retention_s=50.0)
    assert [c.conversation_id for c in finished] == ["idle"] and finished[0].end_reason == "idle"
    assert to_close == ["idle"] and to_delete == ["old"]


@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(["turn", "end"]), st.integers(0, 30), st.text(min_size=1, max_size=80)),
                max_size=60))
def test_any_event_sequence_emits_at_most_one_conversation(ops: list[tuple[str, int, str]]) -> None:
    state, emitted = None, 0
    for kind, i, text in ops:
        if kind == "turn":
            state, _ = ses.apply_turn(state, t(i, text=text), LIMITS, now=1.0)
            if not ses.is_closed(state):
                assert len(state["turns"]) <= LIMITS.max_turns
        else:
            state, conv, _ = ses.apply_end(state, end(), now=1.0)
            emitted += conv is not None
    assert emitted <= 1
