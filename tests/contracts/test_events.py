from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import Conversation, EndEvent, TurnEvent, decode_event, decode_input, encode


def turn(**kw: object) -> bytes:
    base = {"conversation_id": "c1", "turn_index": 0, "role": "user", "text": "hi", "timestamp": 1.0}
    base.update(kw)
    return orjson.dumps(base)


def test_turn_event_defaults_type_and_parses_iso_timestamps() -> None:
    event = decode_event(turn(timestamp="2026-01-01T00:00:00Z"))
    assert isinstance(event, TurnEvent)
    assert event.timestamp == 1767225600.0


def test_end_and_conversation_events() -> None:
    assert isinstance(decode_event(b'{"type":"end","conversation_id":"c","timestamp":2}'), EndEvent)
    conv = decode_event(orjson.dumps({"conversation_id": "c", "turns": [{"index": 0, "role": "user", "text": "x"}]}))
    assert isinstance(conv, Conversation)
    assert decode_event(encode(conv)) == conv


@pytest.mark.parametrize(
    ("raw", "reason", "match"),
    [
        (b"", "empty", "no value"),
        (b"{not json", "malformed_json", "unexpected character|expected"),
        (b"[1,2]", "invalid_schema", "expected a JSON object, got list"),
        (turn(role="bot"), "invalid_schema", "field 'role'"),
        (turn(text=""), "invalid_schema", "field 'text'"),
        (turn(turn_index="x"), "invalid_schema", "field 'turn_index'"),
        (turn(conversation_id=None), "invalid_schema", "field 'conversation_id'"),
        (turn(type="poll"), "invalid_schema", "field 'type'"),
        (turn(turn_index="0"), "invalid_schema", "field 'turn_index'"),
        (turn(turn_index=1.0), "invalid_schema", "field 'turn_index'"),
        (turn(feedback={"csat": "5"}), "invalid_schema", "field 'feedback.csat'"),
        (turn(feedback={"thumbs": "up", "extra": 1}), "invalid_schema", "field 'feedback.extra'"),
        (turn(text="x" * 5000), "too_large", "max_event_bytes"),
    ],
)
def test_invalid_events_have_a_reason_and_name_the_field(raw: bytes, reason: str, match: str) -> None:
    with pytest.raises(InvalidEvent, match=match) as info:
        decode_event(raw, max_bytes=2048)
    assert info.value.reason == reason


@given(st.binary(max_size=300))
def test_decoder_never_raises_anything_but_invalid_event(raw: bytes) -> None:
    try:
        decode_event(raw)
    except InvalidEvent as exc:
        assert exc.reason in {"empty", "malformed_json", "invalid_schema", "too_large"}


@given(st.dictionaries(st.sampled_from(["conversation_id", "turn_index", "role", "text", "timestamp", "type",
                                        "turns", "feedback", "metadata"]),
                       st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=5),
                                 st.lists(st.integers(0, 9), max_size=2),
                                 st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2))))
def test_decoder_on_json_shaped_garbage(obj: dict) -> None:
    try:
        decode_event(orjson.dumps(obj))
    except InvalidEvent:
        pass


def test_unknown_top_level_fields_are_ignored_by_name_and_never_kept() -> None:
    decoded = decode_input(turn(user_id="u-42", content="secret words", metadata={"app": "web"}))
    assert isinstance(decoded.event, TurnEvent)
    assert decoded.unknown_fields == ("user_id", "content")
    assert decoded.event.metadata == {"app": "web"}
    assert b"secret words" not in encode(decoded.event) and b"u-42" not in encode(decoded.event)


def test_unknown_fields_of_a_conversations_turns_are_ignored_too() -> None:
    raw = orjson.dumps({"conversation_id": "c", "trace": "t", "turns": [{"index": 0, "role": "user", "text": "x",
                                                                         "tokens": 3}]})
    decoded = decode_input(raw)
    assert isinstance(decoded.event, Conversation)
    assert decoded.unknown_fields == ("trace", "turns.tokens")


def test_a_missing_timestamp_is_the_broker_records_time() -> None:
    raw = orjson.dumps({"conversation_id": "c1", "turn_index": 0, "role": "user", "text": "hi"})
    decoded = decode_input(raw, timestamp=1234.5)
    assert decoded.event.timestamp == 1234.5 and decoded.filled_timestamp  # type: ignore[union-attr]
    end = decode_input(b'{"type":"end","conversation_id":"c1","timestamp":null}', timestamp=99.0)
    assert isinstance(end.event, EndEvent) and end.event.timestamp == 99.0
    assert not decode_input(turn(), timestamp=5.0).filled_timestamp


def test_a_schema_error_names_its_field_and_conversation() -> None:
    with pytest.raises(InvalidEvent) as info:
        decode_event(turn(turn_index="0", conversation_id="conv-9"))
    assert info.value.field == "turn_index" and info.value.conversation_id == "conv-9"
