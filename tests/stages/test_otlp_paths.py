"""OTLP decode's two mapping paths agree, per-message sharing stays per resource, key kinds stay bounded."""

from __future__ import annotations

from collections import Counter

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry

from monitor.contracts.events import EndEvent, TurnEvent
from monitor.contracts.metrics import Metrics
from monitor.stages.genai import GENAI, MAX_KINDS, READ, GenAiMapping, key_kind
from monitor.stages.genai_calls import call_events, general_events
from monitor.stages.otlp import OtlpDecoder
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
