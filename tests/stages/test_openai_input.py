"""OpenAI Chat Completions logs in (CONVMON_INPUT_FORMAT=openai, `convmon replay --format openai`): conversations
and single messages become convmon events; messages that are not turns are accepted and counted."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.contracts.errors import ConfigError, InvalidEvent
from monitor.contracts.events import Conversation, TurnEvent, decode_event
from monitor.contracts.openai_chat import decode_chat, is_chat
from monitor.stages.hotpath import Input
from monitor.stages.inputs import ChatInput
from monitor.tools.replay import read_dataset
from tests.support.docs_examples import openai_chat_example
from tests.support.hot_path import hot_path


def test_a_conversation_keeps_user_and_assistant_text_and_counts_the_rest() -> None:
    chat = decode_chat(orjson.loads(openai_chat_example()[1]), timestamp=0.0)
    [conversation] = chat.events
    assert isinstance(conversation, Conversation) and conversation.conversation_id == "1042"
    assert [(t.index, t.role, t.text) for t in conversation.turns] == [
        (0, "user", "Weather in Paris?"), (1, "assistant", "12 C and rainy."), (2, "user", "that's wrong and useless")]
    assert chat.skipped == ("developer", "assistant", "tool")
    assert conversation.metadata == {"model_version": "gpt-4o-mini"} and conversation.ended_at == 1764979200.0


def test_content_parts_join_and_non_text_parts_stand_as_their_type() -> None:
    message = {"id": "c", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "data:..."}},
        {"type": "weird type!"}]}, {"role": "assistant", "content": None, "refusal": "I can't help with that."}]}
    [conversation] = decode_chat(message, timestamp=0.0).events
    assert isinstance(conversation, Conversation)
    assert [t.text for t in conversation.turns] == ["what is this?\n[image_url]\n[part]", "I can't help with that."]


def test_a_conversation_without_an_id_is_named_by_its_messages() -> None:
    messages = {"messages": [{"role": "user", "content": "hi"}]}
    first = decode_chat(messages, timestamp=0.0).events[0]
    assert first.conversation_id.startswith("sha-")
    assert decode_chat(orjson.loads(orjson.dumps(messages)), timestamp=0.0).events[0].conversation_id == \
        first.conversation_id


def test_a_message_event_is_a_turn_event_and_a_tool_call_is_none() -> None:
    lines = openai_chat_example()
    chat = decode_chat(orjson.loads(lines[5]), timestamp=9.0)
    [turn] = chat.events
    assert isinstance(turn, TurnEvent) and (turn.turn_index, turn.role, turn.text, turn.timestamp) == (
        1, "assistant", "Amber leaves drift down...", 9.0)
    assert decode_chat(orjson.loads(lines[3]), timestamp=9.0).events == []
    assert decode_chat(orjson.loads(lines[3]), timestamp=9.0).skipped == ("assistant",)
    assert not is_chat(orjson.loads(lines[-1])) and is_chat(orjson.loads(lines[4]))


@pytest.mark.parametrize(("message", "field", "detail"), [
    ({"conversation_id": 7, "turn_index": 1, "role": "human", "content": "x"}, "role",
     "field 'role': expected one of system, developer, user, assistant, tool, function, got 'human'"),
    ({"id": "c", "messages": [{"role": "user", "content": "a"}, {"content": "b"}]}, "messages",
     "field 'messages.1.role': expected one of"),
    ({"id": "c", "messages": [{"role": "user", "content": 5}]}, "messages",
     "field 'messages.0.content': expected a string, a list of content parts or null"),
    ({"id": "c", "messages": [{"role": "system", "content": "only a prompt"}]}, "messages",
     "field 'messages': no user or assistant message with text"),
    ({"id": "c", "messages": []}, "messages", "field 'messages': expected a non-empty list of messages"),
    ({"conversation_id": "c", "role": "user", "content": "no index"}, "turn_index",
     "field 'turn_index': Field required"),
    ({"conversation_id": [1], "turn_index": 0, "role": "user", "content": "x"}, "conversation_id",
     "field 'conversation_id'"),
])
def test_errors_name_the_field(message: dict[str, object], field: str, detail: str) -> None:
    with pytest.raises(InvalidEvent, match=re.escape(detail)) as caught:
        decode_chat(message, timestamp=0.0)
    assert caught.value.field == field and caught.value.reason == "invalid_schema"


@given(st.one_of(st.integers(-(2 ** 63), 2 ** 64 - 1), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                 st.text(min_size=1, max_size=20)))
def test_ids_of_any_json_scalar_type_are_their_json_text(cid: object) -> None:
    expected = cid if isinstance(cid, str) else str(cid) if isinstance(cid, int) and not isinstance(cid, bool) \
        else orjson.dumps(cid).decode()
    turn = {"conversation_id": cid, "turn_index": 0, "role": "user", "text": "x", "timestamp": 1.0}
    assert decode_event(orjson.dumps(turn)).conversation_id == expected
    [event] = decode_chat({"id": cid, "messages": [{"role": "user", "content": "x"}]}, timestamp=0.0).events
    assert event.conversation_id == expected


def test_the_hot_path_scores_the_doc_example_and_counts_what_is_not_a_turn() -> None:
    hot, metrics = hot_path()
    hot.decoder = ChatInput(100_000)
    batch = []
    for raw in openai_chat_example():
        obj = orjson.loads(raw)
        key = str(obj.get("conversation_id", obj.get("id"))).encode()
        batch.append(Input(key, raw, 0, timestamp=1.0))
    out = hot.ingest(batch, now=1.0)
    assert out.dead == [] and out.rekey == []
    assert sorted(c.conversation_id for c, _ in out.closed) == ["1042", "chat-1", "chat-3"]
    value = metrics.registry.get_sample_value
    assert {role: value("convmon_input_messages_skipped_total", {"role": role})
            for role in ("system", "developer", "assistant", "tool")} == {
        "system": 1, "developer": 1, "assistant": 2, "tool": 2}


def test_unkeyed_chat_messages_are_re_keyed_as_convmon_events() -> None:
    hot, _ = hot_path()
    hot.decoder = ChatInput(100_000)
    out = hot.ingest([Input(None, raw, 0, timestamp=1.0) for raw in openai_chat_example()], now=1.0)
    assert out.dead == [] and len(out.rekey) == 6  # 2 conversations, 3 turns, 1 end
    for send in out.rekey:
        assert decode_event(send.value).conversation_id == send.key.decode()  # convmon JSON on the re-keyed topic


def test_replay_reads_the_doc_example_as_convmon_events(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_bytes(b"\n".join(openai_chat_example()) + b"\n")
    replay = read_dataset(path, fmt="openai")
    assert replay.skipped_messages == 6 and len(replay.events) == 6
    for event in replay.events:
        decode_event(orjson.dumps(event), timestamp=1.0)  # what any worker reads
    assert [e["type"] for e in replay.events] == ["conversation", "conversation", "turn", "turn", "turn", "end"]
    assert "timestamp" not in replay.events[2]  # the broker record's time stands in, as in the original
    with pytest.raises(ConfigError, match=r"chats.jsonl:\d+: field 'role'"):
        path.write_text('{"conversation_id": "c", "turn_index": 0, "role": "human", "content": "x"}\n')
        read_dataset(path, fmt="openai")
    with pytest.raises(ConfigError, match="field 'turn_index'.*an OpenAI chat message. its 'content' is read with "
                                          "CONVMON_INPUT_FORMAT=openai"):  # without --format: a convmon turn event
        path.write_text('{"conversation_id": "c", "role": "user", "content": "x"}\n')
        read_dataset(path)
