"""The fault suite's per-id ledger: each outcome classified as the suite's tables say, from records shaped
like the scores and dead-letters topics' (no broker needed)."""

from __future__ import annotations

import orjson
from aiokafka import ConsumerRecord

from tests.support.accounting import ANY_REASON, SCORED, Expect, Ledger


def _record(key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None) -> ConsumerRecord:
    return ConsumerRecord(topic="t", partition=0, offset=0, timestamp=0, timestamp_type=0, key=key, value=value,
                          checksum=None, serialized_key_size=0, serialized_value_size=len(value),
                          headers=headers or [])


def score(cid: str, scorer: str = "distilled", *, score_id: str | None = None, **fields: object) -> ConsumerRecord:
    sid = f"{scorer}:{cid}" if score_id is None else score_id
    return _record(cid.encode(), orjson.dumps({"type": "score", "conversation_id": cid, "scorer": scorer, **fields}),
                   [("convmon-score-id", sid.encode())])


def dead(key: bytes | None, value: bytes, reason: str) -> ConsumerRecord:
    return _record(key, value, [("convmon-reason", reason.encode()), ("convmon-stage", b"sessionize")])


def test_each_outcome_is_classified() -> None:
    ledger = Ledger({"ok": SCORED, "twice": SCORED, "lost": SCORED, "both": SCORED, "late": SCORED,
                     "big": Expect(reason="too_large"), "big-other": Expect(reason="too_large"),
                     "any": Expect(reason=ANY_REASON), "policy": Expect(either=True)})
    ledger.add_scores([score("ok"), score("twice"), score("twice"), score("both"), score("policy"),
                       score("ok", scorer="llm"), score("stranger"), _record(b"x", b"not json")])
    ledger.add_dead_letters([
        dead(b"both", b"{}", "late_event"), dead(b"late", b"{}", "late_event"),
        dead(None, b'{"type":"conversation","conversation_id":"big","turns":[{"text":"hhhh', "too_large"),
        dead(b"big-other", b"", "malformed_json"), dead(b"any", b"", "invalid_schema"),
    ])
    outcomes = {cid: ledger.outcome(cid) for cid in ledger.expect}
    assert outcomes == {"ok": "ok", "twice": "double", "lost": "lost", "both": "wrong", "late": "wrong",
                        "big": "ok", "big-other": "wrong", "any": "ok", "policy": "ok"}
    table = ledger.table()
    assert (table["scored_once"], table["dead_lettered"], table["lost"], table["double_counted"],
            table["wrong_outcome"]) == (2, 2, 1, 1, 3)
    assert table["expected_scored"] == 6  # the five that must be scored, and the policy id that was
    assert table["unparsable_scores"] == 1 and table["foreign_scores"] == 1  # the llm score is another scorer's
    # progress counts expected outcomes only: "late" has a dead letter but still waits for its score
    assert ledger.accounted() == 7 and not ledger.complete()


def test_garbage_is_matched_by_its_marker_and_anything_else_is_unattributed() -> None:
    ledger = Ledger({"c": SCORED}, garbage={"garbage-1", "garbage-2"})
    ledger.add_dead_letters([dead(None, b"garbage-1 \x00\xff", "malformed_json"),
                             dead(b"garbage-2", b"", "empty"), dead(None, b"garbage-9", "empty"),
                             dead(None, b"???", "malformed_json")])
    assert dict(ledger.garbage_dead) == {"garbage-1": 1, "garbage-2": 1}
    assert dict(ledger.unattributed_dead) == {"empty": 1, "malformed_json": 1}
    ledger.add_scores([score("c")])
    assert ledger.complete()


def test_copies_are_deduplicated_by_their_score_id_and_must_agree() -> None:
    """A duplicate with the same score (only its time differs) is one score once deduplicated by its id; a copy
    with another score, or a record without the right id, is reported."""
    ledger = Ledger({"a": SCORED, "b": SCORED, "c": SCORED})
    ledger.add_scores([score("a", R=1.0, scored_at=1.0), score("a", R=1.0, scored_at=2.0, latency_s=0.3),
                       score("b", R=1.0), score("b", R=2.0), score("c", score_id="distilled:a"),
                       score("x", score_id="")])
    table = ledger.table()
    assert table["double_counted"] == 2 and table["scored_once"] == 1  # on the topic: a and b twice
    assert table["scored_once_by_score_id"] == 2 and table["copies_disagree"] == 1  # a and c; b's copies differ
    assert table["score_id_wrong"] == 2  # c names another conversation, x has an empty id
