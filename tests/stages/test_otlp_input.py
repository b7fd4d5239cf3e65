"""OTLP GenAI input: payloads recorded by the real OpenTelemetry SDK and serialised by its own OTLP encoders."""

from __future__ import annotations

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import EndEvent, TurnEvent, decode_event, encode
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.genai import Call, GenAiMapping
from monitor.stages.genai_calls import call_events
from monitor.stages.hotpath import HotPath, Input
from monitor.stages.inputs import OtlpInput, build_input
from monitor.stages.otlp import OtlpDecoder
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals
from monitor.tools.otel_traffic import Chat, GenAiApp, conversation_texts
from tests.support.memstore import MemStore

ENCODINGS = ("otlp_proto", "otlp_json")
RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)


def decoder(signal: str = "traces", encoding: str = "otlp_proto", **mapping: object) -> tuple[OtlpDecoder, Metrics]:
    metrics = Metrics(CollectorRegistry())
    return OtlpDecoder(signal, encoding, GenAiMapping(**mapping), metrics, max_event_bytes=1 << 22), metrics  # type: ignore[arg-type]


def outcomes(metrics: Metrics, signal: str) -> dict[str, float]:
    return {s.labels["outcome"]: s.value for f in metrics.registry.collect() if f.name == "convmon_otlp_records"
            for s in f.samples if s.name.endswith("_total") and s.labels["signal"] == signal}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_one_message_of_many_conversations_gives_each_turn_once(encoding: str) -> None:
    app = GenAiApp()
    chats = [Chat("conv-a", conversation_texts(3, "a")), Chat("conv-b", conversation_texts(2, "b")),
             Chat("conv-c", conversation_texts(2, "c"), capture_content=False)]
    refs = app.trace(chats)
    dec, metrics = decoder(encoding=encoding)
    events, problems = dec.decode(app.take_traces(encoding))  # type: ignore[arg-type]
    assert problems == []
    turns = [e for e in events if isinstance(e, TurnEvent)]
    by_cid: dict[str, list[TurnEvent]] = {}
    for t in turns:
        by_cid.setdefault(t.conversation_id, []).append(t)
    assert sorted(by_cid) == ["conv-a", "conv-b"]  # conv-c captured no content
    for chat in chats[:2]:
        got = by_cid[chat.conversation_id]
        assert [t.turn_index for t in got] == list(range(len(chat.texts)))  # history repeats, each turn once
        assert [t.text for t in got] == chat.texts
        assert [t.role for t in got] == ["user", "assistant"] * (len(chat.texts) // 2)
        # every assistant turn keeps the span of the call that produced it (not of a later call repeating it)
        assert [t.span for t in got if t.role == "assistant"] == refs[chat.conversation_id]
        assert got[1].response_id == f"chatcmpl-{chat.conversation_id}-0"
        assert got[0].metadata == {"app": "chat-web", "model_version": "gpt-4o-mini-2024-07-18"}
    assert outcomes(metrics, "traces") == {"turns": 5, "no_content": 2, "not_genai": 7}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_log_events_give_the_same_turns(encoding: str) -> None:
    app = GenAiApp()
    refs = app.trace([Chat("conv-l", conversation_texts(2, "l"))], logs=True)
    dec, metrics = decoder("logs", encoding)
    events, _ = dec.decode(app.take_logs(encoding))  # type: ignore[arg-type]
    assert [(e.turn_index, e.span) for e in events if isinstance(e, TurnEvent) and e.role == "assistant"] == [
        (1, refs["conv-l"][0]), (3, refs["conv-l"][1])]
    assert outcomes(metrics, "logs") == {"turns": 2}


def test_fallback_attribute_feedback_end_and_older_conventions() -> None:
    app = GenAiApp()
    with app.tracer.start_as_current_span("chat", attributes={
        "gen_ai.operation.name": "chat", "session.id": "sess-1", "app.thumbs": "down", "app.ended": True,
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hello?",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "hi!"}):
        pass
    with app.tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat",
                                                              "gen_ai.conversation.id": "old-events"}) as span:
        span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": orjson.dumps([{"role": "user", "content": "q"}])
                                                 .decode()})
        span.add_event("gen_ai.content.completion", {"gen_ai.completion": orjson.dumps(
            [{"role": "assistant", "content": "a"}]).decode()})
    dec, _ = decoder(thumbs_attribute="app.thumbs", end_attribute="app.ended")
    events, problems = dec.decode(app.take_traces("otlp_proto"))
    assert problems == []
    sess = [e for e in events if e.conversation_id == "sess-1"]
    assert [(type(e).__name__, getattr(e, "text", None)) for e in sess] == [
        ("TurnEvent", "hello?"), ("TurnEvent", "hi!"), ("EndEvent", None)]
    assert isinstance(sess[1], TurnEvent) and sess[1].feedback is not None and sess[1].feedback.thumbs == "down"
    assert isinstance(sess[2], EndEvent) and sess[2].turn_count == 2
    assert [e.text for e in events if isinstance(e, TurnEvent) and e.conversation_id == "old-events"] == ["q", "a"]


def test_malformed_payloads_and_content() -> None:
    dec, _ = decoder()
    for raw in (b"\xff\xff\xff garbage", b""):
        with pytest.raises(InvalidEvent) as err:
            dec.decode(raw)
        assert err.value.reason in ("malformed_otlp", "empty")
    dec_json, _ = decoder(encoding="otlp_json")
    with pytest.raises(InvalidEvent, match="malformed_otlp"):
        dec_json.decode(b'{"resourceSpans": 7}')
    app = GenAiApp()
    with app.tracer.start_as_current_span("chat", attributes={"gen_ai.conversation.id": "bad",
                                                              "gen_ai.input.messages": "[not json"}):
        pass
    app.trace([Chat("good", conversation_texts(1, "g"))])
    events, problems = dec.decode(app.take_traces("otlp_proto"))
    assert {e.conversation_id for e in events} == {"good"}  # the rest of the message survives
    assert len(problems) == 1 and "gen_ai.input.messages is not JSON" in problems[0].detail
    assert problems[0].reason == "invalid_genai"


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_over_long_conversation_ids_are_dead_lettered_as_on_json_input_never_cut(encoding: str) -> None:
    """Cut to 256 characters, two ids sharing a prefix became one conversation."""
    settings = Settings(input_format="otlp_traces", otlp_encoding=encoding)
    metrics = Metrics(CollectorRegistry(), dimensions=tuple(settings.metric_dimensions))
    decoder_ = build_input(settings.otel, settings.metrics, metrics, max_event_bytes=settings.max_event_bytes)
    prefix = "u" * 256
    app = GenAiApp()
    app.trace([Chat(prefix + "-a", conversation_texts(1, "a")), Chat(prefix + "-b", conversation_texts(1, "b")),
               Chat("fine", conversation_texts(1, "f")), Chat("x" * 256, conversation_texts(1, "x"))])
    raw = app.take_traces(encoding)
    decoded = decoder_.decode(raw, rekeyed=False)
    assert {e.conversation_id for e, _ in decoded.events} == {"fine", "x" * 256}  # 256 is allowed, 257 is not
    assert decoded.problem is not None and decoded.problem.reason == "invalid_schema"  # JSON input's reason
    assert "'conversation_id': 258 characters, at most 256" in decoded.problem.detail and prefix not in \
        decoded.problem.detail  # never the id itself in a dead letter's detail
    path, _ = hot(decoder_)
    out = path.ingest([Input(None, raw, 0)], now=1.0)
    assert [(d.reason, d.value) for d in out.dead] == [("invalid_schema", raw)]
    assert {s.labels["outcome"]: s.value for f in metrics.registry.collect() if f.name == "convmon_otlp_records"
            for s in f.samples if s.name.endswith("_total")}["invalid_conversation_id"] == 4  # two calls, decoded twice


def test_otlp_json_ids_are_hex() -> None:
    app = GenAiApp()
    refs = app.trace([Chat("hex", conversation_texts(1, "h"))])
    raw = app.take_traces("otlp_json")
    [span] = [s for s in orjson.loads(raw)["resourceSpans"][0]["scopeSpans"][0]["spans"] if s["name"] != "POST /chat"]
    assert f"{span['traceId']}-{span['spanId']}" == refs["hex"][0]  # hex, as the Collector's otlp_json writes
    # protobuf's own JSON mapping reads those ids as base64 (wrong bytes): the decoder converts them first
    naive = json_format.ParseDict(orjson.loads(raw), ExportTraceServiceRequest(), ignore_unknown_fields=True)
    assert naive.resource_spans[0].scope_spans[0].spans[0].trace_id.hex() != span["traceId"]
    events, _ = decoder(encoding="otlp_json")[0].decode(raw)
    assert [e.span for e in events if isinstance(e, TurnEvent) and e.span] == refs["hex"]


def hot(decoder_: OtlpInput) -> tuple[HotPath, Metrics]:
    metrics = decoder_.otlp.metrics
    sessions = Sessionizer(MemStore(), Limits(), idle_timeout_s=10.0, closed_retention_s=60.0, allowed_lateness_s=1.0)
    exporter = Exporter(metrics, dimensions=list(metrics.dimensions), cap=5, rubric=RUBRIC)
    counts = MemStore()
    totals = PartitionTotals(counts, metrics.partition_families)
    dedup = DedupWindow(counts, window_s=100.0, max_keys=1000)
    return HotPath(sessions, dedup, totals, exporter, metrics, RUBRIC,
                   max_event_bytes=1 << 22, max_request_bytes=1 << 20, sample_rate=0.0, decoder=decoder_), metrics


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_hot_path_rekeys_unkeyed_otlp_as_json_and_closes_on_idle(encoding: str) -> None:
    settings = Settings(input_format="otlp_traces", otlp_encoding=encoding, metric_dimensions=["app"])
    metrics = Metrics(CollectorRegistry(), dimensions=("app",))
    decoder_ = build_input(settings.otel, settings.metrics, metrics, max_event_bytes=settings.max_event_bytes)
    assert isinstance(decoder_, OtlpInput)
    path, _ = hot(decoder_)
    app = GenAiApp()
    chats = [Chat(f"k-{i}", conversation_texts(2, str(i))) for i in range(3)]
    refs = app.trace(chats)
    first = path.ingest([Input(None, app.take_traces(encoding), 0)], now=1.0)  # type: ignore[arg-type]
    assert first.closed == [] and first.dead == []
    assert {r.key for r in first.rekey} == {b"k-0", b"k-1", b"k-2"}
    assert all(isinstance(decode_event(r.value), TurnEvent) for r in first.rekey)  # convmon JSON from here on
    again = path.ingest([Input(r.key, r.value, 2, rekeyed=True) for r in first.rekey], now=2.0)
    # a later message repeats the whole history: nothing is stored twice
    app.trace([Chat("k-0", conversation_texts(2, "0"))])
    repeat = path.ingest([Input(None, app.take_traces(encoding), 0)], now=3.0)  # type: ignore[arg-type]
    path.ingest([Input(r.key, r.value, 2, rekeyed=True) for r in repeat.rekey], now=3.0)
    # k-0 traced again: its user turns 0 and 2 are repeats; answers 1 and 3 come from new calls (new spans)
    assert metrics.repeated_turns._value.get() == 2
    assert again.closed == []
    closed = path.sweep(now=20.0, owned={2}).closed
    assert sorted(c.conversation_id for c, _ in closed) == ["k-0", "k-1", "k-2"]
    for conversation, partition in closed:
        assert partition == 2 and conversation.end_reason == "idle"
        assert [t.index for t in conversation.turns] == [0, 1, 2, 3]
        assert conversation.metadata == {"app": "chat-web"}
        span, response = conversation.judged_span()
        if conversation.conversation_id != "k-0":
            assert span == refs[conversation.conversation_id][-1]
            assert response == f"chatcmpl-{conversation.conversation_id}-1"


def test_garbage_otlp_is_dead_lettered_with_its_bytes() -> None:
    settings = Settings(input_format="otlp_traces")
    metrics = Metrics(CollectorRegistry(), dimensions=tuple(settings.metric_dimensions))
    decoder_ = build_input(settings.otel, settings.metrics, metrics, max_event_bytes=settings.max_event_bytes)
    assert isinstance(decoder_, OtlpInput)
    path, _ = hot(decoder_)
    out = path.ingest([Input(None, b"\x0a\xff\xff", 0)], now=1.0)
    assert [(d.reason, d.value) for d in out.dead] == [("malformed_otlp", b"\x0a\xff\xff")]


def test_otel_settings_are_validated_with_one_line_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.contracts.errors import ConfigError
    from monitor.contracts.settings import load_settings

    for name, value, field in (("CONVMON_INPUT_FORMAT", "otlp_metrics", "input_format"),
                               ("CONVMON_OTLP_ENCODING", "protobuf", "otlp_encoding"),
                               ("CONVMON_OTEL_EVALUATION_SCORERS", "llm,human", "otel_evaluation_scorers")):
        monkeypatch.setenv(name, value)
        with pytest.raises(ConfigError, match=field):
            load_settings()
        monkeypatch.delenv(name)
    monkeypatch.setenv("CONVMON_OTLP_CONVERSATION_ATTRIBUTES", "session.id,app.thread")
    assert load_settings().otel.otlp_conversation_attributes == ["session.id", "app.thread"]


def test_turns_built_without_validation_equal_validated_ones() -> None:
    app = GenAiApp()
    app.trace([Chat("fast", conversation_texts(2, "f"), feedback={"app.thumbs": "up"})])
    events, _ = decoder(thumbs_attribute="app.thumbs")[0].decode(app.take_traces("otlp_proto"))
    turns = [e for e in events if isinstance(e, TurnEvent)]
    assert len(turns) == 4 and turns[-1].feedback is not None
    for turn in turns:
        assert TurnEvent.model_validate(turn.model_dump()) == turn
        assert decode_event(encode(turn)) == turn
        assert turn.model_fields_set == set(TurnEvent.model_fields)


def _call(history: list[tuple[str, str]], answer: str) -> Call:
    sent = orjson.dumps([{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in history]).decode()
    return Call({"gen_ai.conversation.id": "t", "gen_ai.input.messages": sent,
                 "gen_ai.output.messages": orjson.dumps([{"role": "assistant", "content": answer}]).decode()},
                {}, bytes(range(1, 17)), bytes(range(1, 9)), 1.0, 2.0)


@pytest.mark.parametrize("second", [
    [("system", "s"), ("user", "u0"), ("assistant", "a0"), ("user", "u1")],  # extends the first call's history
    [("system", "s"), ("user", "u0")],  # the same history (a retry)
    [("system", "other"), ("user", "u0"), ("assistant", "a0"), ("user", "u1")],  # not an extension
    [("user", "u0"), ("assistant", ""), ("tool", "x"), ("user", "u1")],  # an empty answer is no turn
])
def test_parsing_only_the_new_history_gives_what_a_full_parse_gives(second: list[tuple[str, str]]) -> None:
    first = _call([("system", "s"), ("user", "u0")], "a0")
    later = _call(second, "a1")
    mapping = GenAiMapping(dimensions=())
    seen: set[int] = set()
    known: dict[str, tuple[str, int]] = {}
    for event in call_events(first, "t", mapping, seen, known):
        seen.add(event.turn_index)  # type: ignore[union-attr]
    cached = call_events(later, "t", mapping, seen, known)
    full_seen = {e.turn_index for e in call_events(first, "t", mapping)}  # type: ignore[union-attr]
    fresh = call_events(later, "t", mapping, full_seen)
    assert [(e.turn_index, e.text) for e in cached] == [(e.turn_index, e.text) for e in fresh]  # type: ignore[union-attr]


def test_otlp_json_walk_reads_what_protobufs_json_parser_read() -> None:
    app = GenAiApp()
    refs = app.trace([Chat("snake", conversation_texts(1, "s"))])
    request = json_format.MessageToDict(encode_spans(app.spans.get_finished_spans()), preserving_proto_field_name=True)
    raw = orjson.dumps(request)  # snake_case field names and base64 ids: protobuf's JSON mapping, not OTLP/JSON's
    events, problems = decoder(encoding="otlp_json")[0].decode(raw)
    assert problems == []
    assert [e.span for e in events if isinstance(e, TurnEvent) and e.span] == refs["snake"]
    assert [e.text for e in events if isinstance(e, TurnEvent)] == conversation_texts(1, "s")
    dec_json, _ = decoder(encoding="otlp_json")
    bad_value = b'{"key": "gen_ai.conversation.id", "value": 5}'  # an attribute the mapping reads
    for bad in (b"[1, 2]", b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [' + bad_value + b"]}]}]}]}",
                b'{"resourceSpans": [{"scopeSpans": "spans"}]}'):
        with pytest.raises(InvalidEvent, match="malformed_otlp"):
            dec_json.decode(bad)
