from __future__ import annotations

import orjson
from prometheus_client import generate_latest

from monitor.contracts.events import decode_event
from monitor.contracts.score_codec import decode_score
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.stages.hotpath import Input, rekeyed_record
from monitor.stages.route import in_sample
from monitor.stages.sends import WEIGHT, Send
from tests.support.hot_path import RUBRIC, end, hot_path, turn


def test_a_batch_sessionizes_rekeys_and_dead_letters() -> None:
    hot, metrics = hot_path()
    batch = [Input(b"a", turn("a", 0), 0), Input(None, turn("b", 0), 1), Input(b"a", end("a"), 0),
             Input(b"x", b"{nope", 2), Input(b"a", turn("a", 1), 0), Input(b"z", b"y" * 20_000, 2)]
    out = hot.ingest(batch, now=1.0)
    assert [c.conversation_id for c, _ in out.closed] == ["a"] and out.closed[0][1] == 0
    assert out.rekey == [Send(b"b", turn("b", 0), [], None)]
    assert [(d.reason, dict(d.headers)["convmon-stage"]) for d in out.dead] == [
        ("malformed_json", b"sessionize"), ("late_event", b"sessionize"), ("too_large", b"sessionize")]
    assert metrics.registry.get_sample_value("convmon_events_total", {"kind": "turn"}) == 3
    assert metrics.registry.get_sample_value("convmon_conversations_finished_total", {"end_reason": "end"}) == 1


def test_unkeyed_events_re_keyed_give_the_same_conversation() -> None:
    hot, _ = hot_path()
    first = hot.ingest([Input(None, end("u", turn_count=3), 0), Input(None, turn("u", 2), 1),
                        Input(None, turn("u", 0), 2), Input(None, turn("u", 1), 3)], now=1.0)
    assert len(first.rekey) == 4
    again = hot.ingest([Input(r.key, r.value, 3, rekeyed=True) for r in reversed(first.rekey)], now=1.0)
    [(conversation, partition)] = again.closed
    assert [t.index for t in conversation.turns] == [0, 1, 2] and partition == 3


def test_forwarded_input_is_re_keyed_whole_with_its_timestamp_and_processed_from_the_re_keyed_topic() -> None:
    """An input whose partitions are not the state's (runtime/layout.py): keyed events too go to the re-keyed
    topic, with the input record's timestamp; nothing is sessionized, and no partition clock moves, until
    they come back from there."""
    hot, metrics = hot_path(forward_input=True)
    out = hot.ingest([Input(b"f", turn("f", 0), 0, timestamp=50.0), Input(b"f", end("f", turn_count=1), 0,
                                                                           timestamp=51.0),
                      Input(b"x", b"{nope", 0)], now=100.0)
    assert out.closed == [] and [d.reason for d in out.dead] == ["malformed_json"]
    assert out.rekey == [rekeyed_record(decode_event(turn("f", 0)), turn("f", 0), 50.0),
                         rekeyed_record(decode_event(end("f", turn_count=1)), end("f", turn_count=1), 51.0)]
    assert [r.timestamp for r in out.rekey] == [50.0, 51.0] and hot.clock.now(0, 100.0) == 100.0  # not observed
    back = hot.ingest([Input(r.key, r.value, 2, rekeyed=True, timestamp=r.timestamp) for r in out.rekey], now=100.0)
    [(conversation, partition)] = back.closed
    assert conversation.conversation_id == "f" and partition == 2 and hot.clock.now(2, 100.0) == 51.0
    assert metrics.registry.get_sample_value("convmon_conversations_finished_total", {"end_reason": "end"}) == 1
    # each event counted once, where it was first read, not again from the re-key hop
    assert metrics.registry.get_sample_value("convmon_events_total", {"kind": "turn"}) == 1
    assert metrics.registry.get_sample_value("convmon_events_total", {"kind": "end"}) == 1


def test_judge_slice_carries_the_router_weight_and_counting_is_once() -> None:
    hot, metrics = hot_path(sample_rate=0.5)
    ids = [f"c{i}" for i in range(20)]
    batch = [Input(c.encode(), v, 0) for c in ids for v in (turn(c, 0), end(c))]
    out = hot.ingest(batch, now=1.0)
    sends = hot.judge_slice(out.closed, judge_accepting=True)
    assert {s.key.decode() for s in sends} == {c for c in ids if in_sample(c, 0.5)}
    assert all(dict(s.headers)[WEIGHT] == b"2.0" for s in sends)
    items = [ItemResult(item_id=i.id, polarity=i.polarity, probability=0.2, verdict=False) for i in RUBRIC.items]
    records = [ScoreRecord(conversation_id=c, scorer="distilled", judge="hashing", rubric_set=RUBRIC.id,
                           rubric_version=RUBRIC.version, model_version="v", items=items, R=0.0) for c in ids]
    partitions = dict.fromkeys(ids, 0)
    scores = hot.count(records, partitions, now=3.0) + hot.count(records[:5], partitions, now=4.0)
    assert len(scores) == 25 and decode_score(scores[0].value, RUBRIC).conversation_id == "c0"
    # every copy, counted or not, carries the same stable id: what a consumer of `scores` dedupes on
    assert [dict(s.headers)["convmon-score-id"] for s in scores[20:]] == [f"distilled:c{i}".encode() for i in range(5)]
    assert metrics.registry.get_sample_value("convmon_conversations_scored_total", {"scorer": "distilled"}) == 20
    assert metrics.registry.get_sample_value("convmon_duplicate_scores_total", {"scorer": "distilled"}) == 5


def test_a_batch_re_delivered_after_it_closed_its_conversations_is_counted_not_dead_lettered() -> None:
    """The broker-restart fault: a batch closed conversations, its offsets were never committed, and it comes
    again. Its events are redeliveries (counted), not late data; a turn past the closed count still is."""
    hot, metrics = hot_path()
    batch = [Input(b"r", v, 0) for v in (turn("r", 0), turn("r", 1), end("r", turn_count=2))]
    assert [c.conversation_id for c, _ in hot.ingest(batch, now=1.0).closed] == ["r"]
    again = hot.ingest([*batch, Input(b"r", turn("r", 2), 0)], now=2.0)
    assert again.closed == []
    assert [d.reason for d in again.dead] == ["late_event"]  # only turn 2: the conversation never had it
    redelivered = {k: metrics.registry.get_sample_value("convmon_redelivered_events_total", {"kind": k})
                   for k in ("turn", "end")}
    assert redelivered == {"turn": 2, "end": 1}
    assert metrics.registry.get_sample_value("convmon_late_events_total", {"kind": "turn"}) == 1


def test_unknown_fields_are_counted_by_a_bounded_name_and_the_event_kept() -> None:
    hot, metrics = hot_path()
    hot.unknown_fields.cap = 2
    extra = {"user_id": "u-1", "content": "private words", "trace": "t", "bad name!": 1}
    raw = orjson.dumps({"conversation_id": "k", "turn_index": 0, "role": "user", "text": "hi", **extra})
    out = hot.ingest([Input(b"k", raw, 0), Input(b"k", end("k"), 0), Input(None, raw, 1)], now=1.0)
    [(conversation, _)] = out.closed
    assert conversation.metadata == {} and conversation.turns[0].timestamp == 1.0  # broker time fills in
    value = metrics.registry.get_sample_value
    assert value("convmon_input_unknown_fields_total", {"field": "user_id"}) == 2
    assert value("convmon_input_unknown_fields_total", {"field": "content"}) == 2
    assert value("convmon_input_unknown_fields_total", {"field": "other"}) == 4  # over the cap, or not a name
    [send] = out.rekey  # the re-keyed copy drops the ignored values and keeps the record's time
    assert send.key == b"k" and b"private words" not in send.value and orjson.loads(send.value)["timestamp"] == 1.0
    exposition = generate_latest(metrics.registry)
    assert b"private words" not in exposition and b"u-1" not in exposition


def test_a_schema_dead_letter_names_its_field_and_an_opaque_conversation_ref() -> None:
    hot, _ = hot_path()
    raw = orjson.dumps({"conversation_id": "secret-id", "turn_index": "0", "role": "user", "text": "hi"})
    [letter] = hot.ingest([Input(None, raw, 0)], now=1.0).dead
    headers = dict(letter.headers)
    assert letter.reason == "invalid_schema" and letter.field == "turn_index"
    assert headers["convmon-field"] == b"turn_index"
    assert letter.conversation == "secret-id"  # kept for the keyed reference of the log line, never logged
