"""A conversation with a rejected turn is never scored as if whole: dead-lettered whole by default, or scored with
an ``incomplete`` mark; a worker that is not the conversation's writer tells the writer through the re-keyed
topic."""

from __future__ import annotations

import orjson
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter

from monitor.contracts.events import Conversation, Rejection
from monitor.contracts.score_codec import decode_score, encode_score
from monitor.contracts.scores import ItemResult, judge_record
from monitor.stages.hotpath import Input, Outputs
from monitor.stages.sessionize import Limits, Sessionizer
from tests.support.hot_path import RUBRIC, end, hot_path, turn
from tests.support.otel_events import events, finished


def human(cid: str, i: int) -> bytes:
    """A user turn with a role the contract does not know: rejected (invalid_schema, field role)."""
    return orjson.dumps({"conversation_id": cid, "turn_index": i, "role": "human", "text": "this is useless",
                         "timestamp": 1.0})


def reply(cid: str, i: int) -> bytes:
    return orjson.dumps({"conversation_id": cid, "turn_index": i, "role": "assistant", "text": "Glad to help!",
                         "timestamp": 1.0})


def value(metrics, name: str, **labels: str) -> float | None:  # type: ignore[no-untyped-def]
    return metrics.registry.get_sample_value(name, labels)


def test_a_conversation_with_a_rejected_turn_is_dead_lettered_whole_naming_the_turn_and_field() -> None:
    hot, metrics = hot_path()
    out = hot.ingest([Input(b"c", human("c", 0), 0), Input(b"c", reply("c", 1), 0),
                      Input(b"c", end("c", turn_count=2), 0)], now=1.0)
    assert out.closed == []  # the rejected turn counts as present: the end closes it, and it is not scored
    assert [(d.reason, d.field) for d in out.dead] == [("invalid_schema", "role"), ("conversation_incomplete", "role")]
    assert dict(out.dead[1].headers)["convmon-detail"].startswith(
        b"turn 0 was rejected (invalid_schema, field role): the conversation is not scored as if whole")
    assert out.dead[1].key == b"c" and b"Glad to help!" in out.dead[1].value  # the conversation, as it closed
    assert value(metrics, "convmon_conversations_incomplete_total", action="dead_lettered") == 1
    assert value(metrics, "convmon_conversations_incomplete_total", action="scored") == 0
    assert value(metrics, "convmon_conversations_finished_total", end_reason="end") is None


def test_with_the_score_policy_it_is_scored_marked_incomplete() -> None:
    hot, metrics = hot_path()
    hot.incomplete.policy = "score"
    out = hot.ingest([Input(b"c", reply("c", 1), 0), Input(b"c", human("c", 0), 0), Input(b"c", end("c"), 0)],
                     now=1.0)
    [(conversation, _)] = out.closed
    assert conversation.incomplete == Rejection(turn_index=0, field="role", reason="invalid_schema")
    assert [d.reason for d in out.dead] == ["invalid_schema"]
    assert value(metrics, "convmon_conversations_incomplete_total", action="scored") == 1
    record = judge_record(conversation, [ItemResult(item_id=i.id, polarity=i.polarity, verdict=False, score=0.0)
                                         for i in RUBRIC.items], judge="j", rubric=RUBRIC, model_version="m",
                          latency_s=0.0)
    assert record.incomplete and decode_score(encode_score(record, RUBRIC), RUBRIC).incomplete
    assert not decode_score(encode_score(record.model_copy(update={"incomplete": False}), RUBRIC), RUBRIC).incomplete
    # the judge reads the conversation from its topic: the mark travels with it
    assert Conversation.model_validate_json(orjson.dumps(conversation.model_dump(mode="json"))) == conversation
    memory = InMemoryLogRecordExporter()
    ev, _ = events(memory)
    ev.observe(record)
    ev.shutdown()
    logs = [r.log_record for r in finished(memory)]
    assert logs and all((r.attributes or {}).get("convmon.conversation.incomplete") is True for r in logs)


def test_a_rejected_turn_read_by_another_worker_marks_the_conversation_through_the_re_keyed_topic() -> None:
    hot, metrics = hot_path(forward_input=True)
    out = hot.ingest([Input(b"f", reply("f", 1), 0, timestamp=5.0), Input(b"f", human("f", 0), 0, timestamp=6.0),
                      Input(b"f", end("f", turn_count=2), 0, timestamp=7.0)], now=10.0)
    assert [d.reason for d in out.dead] == ["invalid_schema"] and len(out.rekey) == 3
    marker = orjson.loads(out.rekey[1].value)
    assert marker == {"type": "rejected", "conversation_id": "f", "timestamp": 6.0,
                      "rejection": {"turn_index": 0, "field": "role", "reason": "invalid_schema"}}
    assert "useless" not in out.rekey[1].value.decode()  # nothing of the rejected turn but its index and field
    back = hot.ingest([Input(r.key, r.value, 2, rekeyed=True, timestamp=r.timestamp) for r in out.rekey], now=10.0)
    assert back.closed == [] and [d.reason for d in back.dead] == ["conversation_incomplete"]
    assert value(metrics, "convmon_conversations_incomplete_total", action="dead_lettered") == 1


def test_an_unkeyed_rejected_turn_sends_its_marker_under_the_conversation_id() -> None:
    hot, _ = hot_path()
    out = hot.ingest([Input(None, human("u", 0), 0, timestamp=3.0)], now=3.0)
    [send] = out.rekey
    assert send.key == b"u" and orjson.loads(send.value)["type"] == "rejected" and send.timestamp == 3.0


def test_a_marker_from_the_input_topic_is_rejected_not_obeyed() -> None:
    hot, _ = hot_path()
    forged = orjson.dumps({"type": "rejected", "conversation_id": "v", "timestamp": 1.0,
                           "rejection": {"reason": "invalid_schema"}})
    out = hot.ingest([Input(b"v", turn("v", 0), 0), Input(b"v", forged, 0), Input(b"v", end("v"), 0)], now=1.0)
    assert [c.conversation_id for c, _ in out.closed] == ["v"] and out.closed[0][0].incomplete is None
    assert [(d.reason, d.key) for d in out.dead] == [("invalid_schema", b"v")]


def test_an_oversized_turn_with_a_readable_id_leaves_its_conversation_incomplete() -> None:
    hot, _ = hot_path()  # max_event_bytes 10,000
    big = orjson.dumps({"conversation_id": "b", "turn_index": 0, "role": "user", "text": "x" * 20_000,
                        "timestamp": 1.0})
    out = hot.ingest([Input(b"b", big, 0), Input(b"b", reply("b", 1), 0), Input(b"b", end("b"), 0)], now=1.0)
    assert [(d.reason, d.field) for d in out.dead] == [("too_large", None), ("conversation_incomplete", None)]
    assert out.closed == []


def test_a_rejected_end_or_a_malformed_record_marks_nothing() -> None:
    hot, _ = hot_path()
    bad_end = orjson.dumps({"type": "end", "conversation_id": "e", "timestamp": 1.0, "turn_count": 0})
    out = hot.ingest([Input(b"e", turn("e", 0), 0), Input(b"e", bad_end, 0), Input(b"e", b"{nope", 0),
                      Input(b"e", end("e"), 0)], now=1.0)
    assert [c.incomplete for c, _ in out.closed] == [None]


def test_the_mark_survives_a_restart_and_a_rejection_after_the_close_is_late() -> None:
    hot, _ = hot_path()
    hot.ingest([Input(b"r", reply("r", 1), 0), Input(b"r", human("r", 0), 0)], now=1.0)
    store = hot.sessions.store
    again = Sessionizer(store, Limits(), idle_timeout_s=10.0, closed_retention_s=60.0, allowed_lateness_s=2.0)
    again.rebuild({0}, now=2.0)
    assert again.open["r"].incomplete == Rejection(turn_index=0, field="role", reason="invalid_schema")
    closed = again.sweep(now=20.0, owned={0}).conversations
    assert [c.incomplete for c in closed] == [Rejection(turn_index=0, field="role", reason="invalid_schema")]
    assert again.reject("r", Rejection(turn_index=2, reason="invalid_schema"), 0, 21.0) == ("late", [])


def test_the_sweep_applies_the_policy_to_a_conversation_closed_by_the_idle_timeout() -> None:
    hot, metrics = hot_path()
    hot.ingest([Input(b"i", reply("i", 1), 0, timestamp=1.0), Input(b"i", human("i", 0), 0, timestamp=1.0)],
               now=1.0)
    out: Outputs = hot.sweep(now=100.0, owned={0})
    assert out.closed == [] and [d.reason for d in out.dead] == ["conversation_incomplete"]
    assert value(metrics, "convmon_conversations_incomplete_total", action="dead_lettered") == 1


def test_a_chat_message_event_with_a_bad_role_leaves_its_conversation_incomplete() -> None:
    from monitor.stages.inputs import ChatInput

    hot, _ = hot_path()
    hot.decoder = ChatInput(10_000)
    bad = orjson.dumps({"conversation_id": 9, "turn_index": 0, "role": "human", "content": [{"type": "text",
                                                                                            "text": "useless"}]})
    out = hot.ingest([Input(b"9", bad, 0), Input(b"9", reply("9", 1), 0), Input(b"9", end("9", turn_count=2), 0)],
                     now=1.0)
    assert [(d.reason, d.field) for d in out.dead] == [("invalid_schema", "role"), ("conversation_incomplete", "role")]
    assert out.closed == []
