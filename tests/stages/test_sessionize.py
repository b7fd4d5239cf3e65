from __future__ import annotations

import random

import orjson

from monitor.contracts.events import EndEvent, Feedback, TurnEvent, encode
from monitor.stages import sessionize as ses
from tests.support.memstore import MemStore

LIMITS = ses.Limits(max_turns=10, max_chars=1000, max_bytes=4096, max_metadata_bytes=300)


def make(store: MemStore | None = None, **kw: float) -> ses.Sessionizer:
    opts = {"idle_timeout_s": 10.0, "closed_retention_s": 50.0, "allowed_lateness_s": 5.0, **kw}
    return ses.Sessionizer(store or MemStore(), LIMITS, **opts)


def t(i: int, text: str = "hello", cid: str = "c", **kw: object) -> TurnEvent:
    return TurnEvent(conversation_id=cid, turn_index=i, role="user", text=text, timestamp=100.0 + i, **kw)


def end(cid: str = "c", **kw: object) -> EndEvent:
    return EndEvent(type="end", conversation_id=cid, timestamp=200.0, **kw)


def test_out_of_order_turns_are_emitted_in_order_on_end() -> None:
    s = make()
    for i in (2, 0, 1):
        assert s.turn(t(i, text=f"t{i}"), 0, now=1.0) == ("ok", [])
    outcome, [conv] = s.end(end(feedback=Feedback(thumbs="up")), 0, now=2.0, rekeyed=False)
    assert outcome == "ok"
    assert [turn.text for turn in conv.turns] == ["t0", "t1", "t2"]
    assert conv.feedback == Feedback(thumbs="up") and conv.end_reason == "end"
    assert "c" in s.closed and "c" not in s.open
    assert set(s.store.data) == {"s|c"}  # turn keys deleted, the tombstone stays


def test_turn_count_closes_when_all_turns_arrived_in_any_order() -> None:
    s = make()
    assert s.end(end(turn_count=3), 0, now=1.0, rekeyed=True) == ("pending", [])
    assert s.turn(t(2), 0, now=1.0)[1] == []
    assert s.turn(t(0), 0, now=1.0)[1] == []
    _, [conv] = s.turn(t(1), 0, now=1.0)
    assert [x.index for x in conv.turns] == [0, 1, 2] and conv.ended_at == 200.0


def test_a_rekeyed_end_without_count_waits_for_the_grace_period() -> None:
    s = make()
    s.turn(t(0), 0, now=1.0)
    assert s.end(end(), 0, now=1.0, rekeyed=True) == ("pending", [])
    s.turn(t(1), 0, now=3.0)  # a late turn within the grace
    assert s.sweep(5.0, {0}).conversations == []
    [conv] = s.sweep(9.1, {0}).conversations
    assert [x.index for x in conv.turns] == [0, 1] and conv.end_reason == "end"


def test_unknown_and_late_events() -> None:
    s = make()
    assert s.end(end(cid="never"), 0, now=1.0, rekeyed=False) == ("unknown_conversation", [])
    assert s.end(end(cid="later"), 0, now=1.0, rekeyed=True) == ("pending", [])
    closed = s.sweep(7.0, {0})  # no turn came within the grace: the end is dead-lettered
    assert [cid for cid, _ in closed.unknown] == ["later"] and closed.conversations == []
    s.turn(t(0), 0, now=1.0)
    s.end(end(), 0, now=2.0, rekeyed=False)
    assert s.end(end(), 0, now=3.0, rekeyed=False) == ("redelivered", [])  # the end it closed with, again
    assert s.turn(t(5), 0, now=3.0) == ("late", [])


def test_idle_close_and_tombstone_expiry_only_in_owned_partitions() -> None:
    s = make()
    s.turn(t(0, cid="a"), 0, now=0.0)
    s.turn(t(0, cid="b"), 1, now=0.0)
    closed = s.sweep(11.0, {0})
    assert [c.conversation_id for c in closed.conversations] == ["a"] and "b" in s.open
    s.sweep(70.0, {0})
    assert "a" not in s.closed and "s|a" not in s.store.data


def test_caps_truncate_and_flag_and_state_stays_bounded() -> None:
    s = make()
    for i in range(30):
        s.turn(t(i, text="x" * 300, metadata={f"k{i}": "v" * 40}), 0, now=1.0)
    o = s.open["c"]
    assert o.truncated and len(o.sizes) <= LIMITS.max_turns
    assert sum(c for c, _ in o.sizes.values()) <= LIMITS.max_chars
    assert len(orjson.dumps(o.meta)) <= LIMITS.max_metadata_bytes
    _, [conv] = s.end(end(), 0, now=2.0, rekeyed=False)
    assert conv.truncated and len(encode(conv)) < LIMITS.max_bytes + LIMITS.max_metadata_bytes + 2000
    assert [x.index for x in conv.turns] == list(range(len(conv.turns)))  # the opening turns are kept


def test_metadata_growing_across_turns_is_capped() -> None:
    """The metadata bomb: each turn adds a big value; the merged metadata never passes its cap."""
    s = make()
    for i in range(3):
        assert s.turn(t(i, metadata={f"blob{i}": "m" * 250}), 0, now=1.0)[0] in ("ok", "truncated")
    _, [conv] = s.end(end(), 0, now=2.0, rekeyed=False)
    assert len(orjson.dumps(conv.metadata)) <= LIMITS.max_metadata_bytes and conv.truncated


def test_state_is_restored_after_a_restart() -> None:
    s = make()
    s.turn(t(0, metadata={"app": "web"}), 3, now=1.0)
    s.turn(t(1), 3, now=1.0)
    s.end(end(cid="x", turn_count=2), 3, now=1.0, rekeyed=True)
    s.turn(t(0, cid="done"), 3, now=1.0)
    s.end(end(cid="done"), 3, now=1.0, rekeyed=False)
    restored = make(s.store.restarted())  # type: ignore[attr-defined]
    restored.rebuild({3}, now=50.0)
    assert set(restored.open) == {"c", "x"} and set(restored.closed) == {"done"}
    assert restored.turn(t(0, cid="done"), 3, now=51.0) == ("redelivered", [])
    assert restored.turn(t(1, cid="done"), 3, now=51.0) == ("late", [])
    _, [conv] = restored.end(end(), 3, now=51.0, rekeyed=False)
    assert [x.index for x in conv.turns] == [0, 1] and conv.metadata == {"app": "web"}


def test_every_write_names_the_partition_of_its_conversation() -> None:
    store = MemStore()
    s = make(store)
    for i in range(3):
        s.turn(t(i, cid="p1"), 1, now=1.0)
        s.turn(t(i, cid="p2"), 2, now=1.0)
    s.end(end(cid="p1"), 1, now=1.0, rekeyed=False)
    s.sweep(20.0, {1, 2})
    assert {p for k, p in store.writes if "p1" in k} == {1} and {p for k, p in store.writes if "p2" in k} == {2}


def test_changelog_grows_with_the_conversation_not_its_square() -> None:
    """10,000 conversations open at once, one turn of each per round: changelog <= 2x conversation bytes."""
    rng = random.Random(0)
    store = MemStore()
    s = ses.Sessionizer(store, ses.Limits(), idle_timeout_s=1e9, closed_retention_s=1e9, allowed_lateness_s=5.0)
    n, turns = 10_000, 12
    conversation_bytes = 0
    for i in range(turns):
        for c in range(n):
            text = "word " * rng.randint(5, 40)
            s.turn(TurnEvent(conversation_id=f"conv-{c}", turn_index=i, role="user" if i % 2 == 0 else "assistant",
                             text=text, timestamp=1.7e9 + i, metadata={"app": "web", "locale": "en-US"}), c % 4, 1.0)
    assert len(s.open) == n
    for c in range(n):
        _, [conv] = s.end(end(cid=f"conv-{c}", turn_count=turns), c % 4, 2.0, rekeyed=False)
        conversation_bytes += len(encode(conv))
    assert store.changelog_bytes <= 2 * conversation_bytes, store.changelog_bytes / conversation_bytes


def test_events_of_a_closed_conversation_it_already_held_are_redeliveries_not_late() -> None:
    """A broker restart between a batch and its offset commit re-delivers the batch: turns the closed conversation
    was emitted with (index below its turn count) and the end that closed it are ``redelivered``; a turn it never
    had is ``late``. The tombstone keeps that knowledge through a restart."""
    store = MemStore()
    s = make(store)
    for i in range(3):
        s.turn(t(i), 0, now=1.0)
    assert s.end(end(turn_count=3), 0, now=1.0, rekeyed=False)[0] == "ok"
    restored = make(store.restarted())
    restored.rebuild({0}, now=2.0)
    for sessions in (s, restored):
        assert [sessions.turn(t(i), 0, now=2.0) for i in range(3)] == [("redelivered", [])] * 3
        assert sessions.end(end(turn_count=3), 0, now=2.0, rekeyed=False) == ("redelivered", [])
        assert sessions.turn(t(3), 0, now=2.0) == ("late", [])
        assert "c" not in sessions.open


def test_an_idle_closed_conversation_takes_no_end_and_no_new_turn() -> None:
    """Closed by idle expiry: an end (it never had one) and a turn after a gap are late; a turn it held is not."""
    s = make()
    for i in (0, 1, 3):
        s.turn(t(i), 0, now=0.0)
    [conv] = s.sweep(11.0, {0}).conversations
    assert conv.end_reason == "idle" and [x.index for x in conv.turns] == [0, 1, 3]
    assert s.turn(t(1), 0, now=12.0) == ("redelivered", [])
    assert s.turn(t(2), 0, now=12.0) == ("late", [])  # the gap: never part of the conversation
    assert s.turn(t(3), 0, now=12.0) == ("late", [])  # past the gap: cannot tell, so late (conservative)
    assert s.end(end(), 0, now=12.0, rekeyed=False) == ("late", [])


def test_an_assembled_conversation_equals_the_validated_one_bytes_included() -> None:
    """assemble builds the conversation without validation (contracts/trusted.py): it must be the model validation
    makes of the same fields: equal, the same fields-set, the same JSON."""
    s = make()
    s.turn(t(1, text="second", metadata={"k": "v"}), 0, now=1.0)
    s.turn(t(0, text="first", span="0" * 32 + "-" + "1" * 16, response_id="r1"), 0, now=1.0)
    _, [conv] = s.end(end(feedback=Feedback(csat=4), simulated_truth=["sat.gratitude"], turn_count=2), 0, now=2.0,
                      rekeyed=False)
    validated = type(conv).model_validate(conv.model_dump())
    assert conv == validated and conv.turns[0] == validated.turns[0]
    assert conv.model_fields_set == validated.model_fields_set
    assert [x.model_fields_set for x in conv.turns] == [x.model_fields_set for x in validated.turns]
    assert conv.model_dump_json() == validated.model_dump_json() and encode(conv) == encode(validated)
