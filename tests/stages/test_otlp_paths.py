"""OTLP decode's two mapping paths agree, per-message sharing stays per resource, key kinds stay bounded."""

from __future__ import annotations

import base64
from collections import Counter

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from prometheus_client import CollectorRegistry

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import EndEvent, TurnEvent
from monitor.contracts.metrics import Metrics
from monitor.stages.genai import GENAI, MAX_KINDS, READ, Call, GenAiMapping, key_kind
from monitor.stages.genai_calls import call_events, chat_turns, general_events
from monitor.stages.otlp import OtlpDecoder, _ascending
from monitor.stages.otlp_json import json_calls
from monitor.tools.otel_traffic import Chat, GenAiApp, conversation_texts

ENCODINGS = ("otlp_proto", "otlp_json")


def decoder(encoding: str = "otlp_proto", **mapping: object) -> tuple[OtlpDecoder, Metrics]:
    metrics = Metrics(CollectorRegistry())
    return OtlpDecoder("traces", encoding, GenAiMapping(**mapping), metrics, max_event_bytes=1 << 22), metrics  # type: ignore[arg-type]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_usual_calls_path_gives_what_the_general_path_gives(encoding: str) -> None:
    app = GenAiApp()
    chats = [Chat("fb-a", conversation_texts(3, "a"), feedback={"app.thumbs": "down", "app.ended": "true"}),
             Chat("fb-b", conversation_texts(2, "b"), feedback={"app.csat": 4})]
    app.trace(chats)
    dec, _ = decoder(encoding=encoding, thumbs_attribute="app.thumbs", csat_attribute="app.csat",
                     end_attribute="app.ended")
    request = dec.parse(app.take_traces(encoding))  # type: ignore[arg-type]
    calls = list(dec._calls(request, Counter()) if encoding == "otlp_proto" else
                 json_calls(request, True, dec.mapping.keys, {}, Counter()))
    assert len(calls) == 5
    for seen_known in (False, True):
        fast: dict[str, list[object]] = {}
        general: dict[str, list[object]] = {}
        state: dict[str, tuple[set[int], dict[str, tuple[str, int]], set[int], dict[str, tuple[str, int]]]] = {}
        for call in calls:
            cid = str(call.attributes["gen_ai.conversation.id"])
            s1, k1, s2, k2 = state.setdefault(cid, (set(), {}, set(), {}))
            got_fast = call_events(call, cid, dec.mapping, s1 if seen_known else None, k1 if seen_known else None)
            got_general = general_events(call, cid, dec.mapping, s2 if seen_known else None,
                                         k2 if seen_known else None)
            assert got_fast == got_general
            for events, seen in ((got_fast, s1), (got_general, s2)):
                seen.update(e.turn_index for e in events if isinstance(e, TurnEvent))
            fast.setdefault(cid, []).extend(got_fast)
            general.setdefault(cid, []).extend(got_general)
        assert fast == general
        last_a = [e for e in fast["fb-a"] if isinstance(e, TurnEvent)][-1]
        assert last_a.feedback is not None and last_a.feedback.thumbs == "down"
        assert [e.turn_count for e in fast["fb-a"] if isinstance(e, EndEvent)] == [6]
        last_b = [e for e in fast["fb-b"] if isinstance(e, TurnEvent)][-1]
        assert last_b.feedback is not None and last_b.feedback.csat == 4


def test_calls_of_two_resources_in_one_message_keep_their_own_metadata() -> None:
    shop, help_ = GenAiApp("shop-web"), GenAiApp("help-web")
    shop.trace([Chat("s-1", conversation_texts(2, "s"))])
    help_.trace([Chat("h-1", conversation_texts(2, "h"))])
    request = ExportTraceServiceRequest.FromString(shop.take_traces("otlp_proto"))
    request.resource_spans.extend(ExportTraceServiceRequest.FromString(help_.take_traces("otlp_proto")).resource_spans)
    for dimensions in (("app",), ("app", "model_version")):  # resource only (shared per resource), span too
        events, _ = decoder(dimensions=dimensions)[0].decode(request.SerializeToString())
        apps = {(e.conversation_id, e.metadata["app"]) for e in events if isinstance(e, TurnEvent)}
        assert apps == {("s-1", "shop-web"), ("h-1", "help-web")}
        assert all(len(e.metadata) == len(dimensions) for e in events if isinstance(e, TurnEvent))


def test_key_kinds_are_remembered_up_to_a_bound() -> None:
    keys = GenAiMapping().keys
    kinds: dict[str, int] = {}
    assert key_kind(kinds, keys, "gen_ai.input.messages") == GENAI | READ
    assert key_kind(kinds, keys, "gen_ai.usage.input_tokens") == GENAI
    assert key_kind(kinds, keys, "service.name") == READ
    assert key_kind(kinds, keys, "gen_ai.prompt.0.content") == GENAI | READ
    assert key_kind(kinds, keys, "http.request.method") == 0
    for i in range(MAX_KINDS + 10):  # a flood of unique keys
        assert key_kind(kinds, keys, f"x.{i}") == 0
    assert len(kinds) == MAX_KINDS


def test_otlp_json_attribute_values_are_protobufs_in_both_field_namings() -> None:
    app = GenAiApp()
    app.trace([Chat("kinds", conversation_texts(1, "k"))])
    request = ExportTraceServiceRequest.FromString(app.take_traces("otlp_proto"))
    values = [AnyValue(string_value="s"), AnyValue(int_value=-(2 ** 62)), AnyValue(double_value=0.5),
              AnyValue(bool_value=True), AnyValue(bytes_value=b"\x00\xff"), AnyValue(),
              AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue(string_value="x")])),
              AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="k", value=AnyValue(bool_value=False))]))]
    names = [f"x.{i}" for i in range(len(values))]
    span = next(s for s in request.resource_spans[0].scope_spans[0].spans if s.name.startswith("chat"))
    for attrs in (span.attributes, request.resource_spans[0].resource.attributes):
        attrs.extend(KeyValue(key=n, value=v) for n, v in zip(names, values, strict=True))
    mapping = GenAiMapping(dimensions=tuple(names), dimension_attributes=tuple(zip(names, names, strict=True)))
    camel = json_format.MessageToDict(request)
    for s in camel["resourceSpans"][0]["scopeSpans"][0]["spans"]:  # OTLP/JSON's hex ids
        s["traceId"], s["spanId"] = (base64.b64decode(s[k]).hex() for k in ("traceId", "spanId"))
    snake = json_format.MessageToDict(request, preserving_proto_field_name=True)  # base64 ids
    got = []
    for encoding, raw in (("otlp_proto", request.SerializeToString()), ("otlp_json", orjson.dumps(camel)),
                          ("otlp_json", orjson.dumps(snake))):
        dec = OtlpDecoder("traces", encoding, mapping, Metrics(CollectorRegistry()), max_event_bytes=1 << 22)  # type: ignore[arg-type]
        parsed = dec.parse(raw)
        calls = list(dec._calls(parsed, Counter()) if encoding == "otlp_proto" else
                     json_calls(parsed, True, mapping.keys, {}, Counter()))
        assert len(calls) == 1
        got.append(calls[0])
    expected = {"x.0": "s", "x.1": -(2 ** 62), "x.2": 0.5, "x.3": True, "x.4": b"\x00\xff", "x.5": None,
                "x.6": [1, "x"], "x.7": {"k": False}}
    assert {n: got[0].resource[n] for n in names} == expected
    assert {n: got[0].attributes[n] for n in names} == expected
    for call in got[1:]:
        assert (call.attributes, call.resource, call.trace_id, call.span_id, call.start, call.end) == (
            got[0].attributes, got[0].resource, got[0].trace_id, got[0].span_id, got[0].start, got[0].end)


def _odd(sent: list[object], got: list[object]) -> Call:
    return Call({"gen_ai.conversation.id": "o", "gen_ai.input.messages": orjson.dumps(sent).decode(),
                 "gen_ai.output.messages": orjson.dumps(got).decode()}, {}, bytes(range(1, 17)), bytes(range(1, 9)),
                1.0, 2.0)


ODD = [  # message shapes the structs read (True) or leave to the general path (False)
    ([{"role": "user", "parts": [{"type": "text", "content": " a "}, {"content": "b"}, {"type": "image"}]}],
     [{"parts": [{"type": "text", "content": None}]}], True),
    ([{"role": "user", "content": "old form"}, {"role": "system", "content": "s"}, {"role": "user"}],
     [{"role": "assistant", "content": [{"text": "x"}, {"text": "y"}, "z"]}], True),
    ([{"role": "user", "parts": []}, {"role": "assistant", "parts": [{"content": "c", "type": None}]},
      {"role": "user", "parts": None, "content": "p"}], [{"role": None, "content": "no"}, {"content": "n > 1"}], True),
    ([1, {"role": "user", "content": "u"}], [{"role": "assistant", "content": "a"}], False),
    ([{"role": "user", "parts": "not a list", "content": "u"}], [{"content": "a"}], False),
    ([{"role": "user", "parts": [["x"]], "content": "u"}], [{"content": "a"}], False),
]


@pytest.mark.parametrize(("sent", "got", "structs"), ODD)
def test_odd_message_shapes_give_what_the_general_path_gives(sent: list[object], got: list[object],
                                                             structs: bool) -> None:
    call, mapping = _odd(sent, got), GenAiMapping()
    out: dict[int, TurnEvent] = {}
    a = call.attributes
    assert chat_turns(call, "o", a["gen_ai.input.messages"], a["gen_ai.output.messages"], mapping, (), None, out,
                      []) is structs
    general = general_events(call, "o", mapping)
    assert call_events(call, "o", mapping) == general
    if structs:
        assert list(out.values()) == general


def test_otlp_json_null_lists_are_empty_and_values_must_be_objects() -> None:
    dec = decoder("otlp_json")[0]
    assert dec.decode(b'{"resourceSpans": [{"scopeSpans": null}, {"scopeSpans": [{"spans": null}]}]}') == ([], [])
    assert dec.decode(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": null}]}]}]}') == ([], [])
    for value in (b"5", b"null", b'"s"'):
        with pytest.raises(InvalidEvent, match="malformed_otlp"):
            dec.decode(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [{"key": "k", "value": '
                       + value + b"}]}]}]}]}")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_calls_out_of_order_in_a_message_give_turns_in_index_order(encoding: str) -> None:
    app = GenAiApp()
    texts = conversation_texts(3, "r")
    refs = app.trace([Chat("rev", texts)], calls=[2, 0, 1])  # the last call first: its history comes first
    events, problems = decoder(encoding)[0].decode(app.take_traces(encoding))  # type: ignore[arg-type]
    assert problems == []
    turns = [e for e in events if isinstance(e, TurnEvent)]
    assert [t.turn_index for t in turns] == list(range(6)) and [t.text for t in turns] == texts
    first, second, last = refs["rev"][1], refs["rev"][2], refs["rev"][0]  # refs are in call order: 2, 0, 1
    assert [t.span for t in turns if t.role == "assistant"] == [first, second, last]
    assert _ascending({0: 0, 2: 0, 5: 0}) and _ascending({}) and not _ascending({0: 0, 3: 0, 1: 0})
