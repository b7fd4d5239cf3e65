"""OTLP payloads from the events topic (the Collector's / Alloy's ``kafka`` exporter) -> convmon events.

One Kafka message is one ``ExportTraceServiceRequest`` (``otlp_spans`` topics) or
``ExportLogsServiceRequest`` (``otlp_logs`` topics), ``otlp_proto`` or ``otlp_json``, decoded with
the official ``opentelemetry-proto`` classes. It holds many conversations' calls and is unkeyed,
so the hot path re-produces each decoded event as convmon JSON under its conversation id.

Cheap for everything that is not a GenAI call: a span is looked at only if one of its attribute
keys starts with ``gen_ai.`` (or one of its events does), a log record only if it is the
``gen_ai.client.inference.operation.details`` event. Calls whose content was not captured
(instrumentations capture none by default) are counted (``no_content``) and skipped.
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import EndEvent, TurnEvent
from monitor.contracts.metrics import Metrics
from monitor.stages.genai import Call, GenAiMapping, NoContent, call_events, conversation_id

Signal = Literal["traces", "logs"]
Encoding = Literal["otlp_proto", "otlp_json"]
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_HEX = re.compile(r"^[0-9a-fA-F]*$")
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def any_value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)


def attributes(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


def _hex_ids_to_base64(node: Any) -> None:
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping reads bytes as base64."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str) and _HEX.match(value) and len(value) % 2 == 0:
                node[key] = base64.b64encode(bytes.fromhex(value)).decode()
            elif isinstance(value, dict | list):
                _hex_ids_to_base64(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item)


class OtlpDecoder:
    """Decodes one events-topic message into convmon events; problems with single calls are returned, not raised."""

    def __init__(self, signal: Signal, encoding: Encoding, mapping: GenAiMapping, metrics: Metrics, *,
                 max_event_bytes: int) -> None:
        self.signal = signal
        self.encoding = encoding
        self.mapping = mapping
        self.metrics = metrics
        self.max_event_bytes = max_event_bytes
        self._request = ExportTraceServiceRequest if signal == "traces" else ExportLogsServiceRequest

    def parse(self, raw: bytes) -> ExportTraceServiceRequest | ExportLogsServiceRequest:
        if not raw:
            raise InvalidEvent("empty", "the message has no value")
        if len(raw) > self.max_event_bytes:
            raise InvalidEvent("too_large", f"{len(raw)} bytes exceeds max_event_bytes={self.max_event_bytes}")
        request = self._request()
        name = self._request.__name__
        try:
            if self.encoding == "otlp_proto":
                request.ParseFromString(raw)
            else:
                obj = orjson.loads(raw)
                _hex_ids_to_base64(obj)
                json_format.ParseDict(obj, request, ignore_unknown_fields=True)
        except (DecodeError, json_format.ParseError, orjson.JSONDecodeError, ValueError, TypeError) as exc:
            raise InvalidEvent("malformed_otlp", f"not an {self.encoding} {name}: {exc}"[:500]) from None
        return request

    def decode(self, raw: bytes) -> tuple[list[TurnEvent | EndEvent], list[str]]:
        """The events of every GenAI call in the message (one per conversation turn), and problems found."""
        request = self.parse(raw)
        outcomes: Counter[str] = Counter()
        problems: list[str] = []
        by_turn: dict[tuple[str, int], TurnEvent] = {}  # one message often repeats a history: keep each turn once
        seen: dict[str, set[int]] = {}
        ends: list[EndEvent] = []
        for call in self._calls(request, outcomes):
            cid = conversation_id(call, self.mapping)
            if cid is None:
                outcomes["no_conversation"] += 1
                continue
            try:
                events = call_events(call, cid, self.mapping, seen.setdefault(cid, set()))
            except NoContent:
                outcomes["no_content"] += 1
                continue
            except ValueError as exc:  # a content attribute that is not what the conventions say
                outcomes["malformed"] += 1
                problems.append(f"span {call.span_id.hex()}: {exc}"[:300])
                continue
            outcomes["turns"] += 1
            for event in events:
                if isinstance(event, EndEvent):
                    ends.append(event)
                    continue
                key = (event.conversation_id, event.turn_index)
                seen[cid].add(event.turn_index)
                kept = by_turn.get(key)
                if kept is None or (event.span and not kept.span):
                    by_turn[key] = event
        for outcome, n in outcomes.items():
            self.metrics.otlp_records.labels(self.signal, outcome).inc(n)
        return [*(by_turn[k] for k in sorted(by_turn)), *ends], problems

    def _calls(self, request: Any, outcomes: Counter[str]) -> Iterable[Call]:
        if self.signal == "traces":
            for rs in request.resource_spans:
                resource: Mapping[str, Any] | None = None
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        events = [(e.name, attributes(e.attributes)) for e in span.events
                                  if e.name.startswith("gen_ai")]
                        if not events and not any(kv.key.startswith("gen_ai.") for kv in span.attributes):
                            outcomes["not_genai"] += 1
                            continue
                        if resource is None:
                            resource = attributes(rs.resource.attributes)
                        yield Call(attributes(span.attributes), resource, span.trace_id, span.span_id,
                                   span.start_time_unix_nano / 1e9, span.end_time_unix_nano / 1e9, events)
        else:
            for rl in request.resource_logs:
                resource = None
                for sl in rl.scope_logs:
                    for record in sl.log_records:
                        if record.event_name != DETAILS_EVENT and not any(
                                kv.key == "event.name" and kv.value.string_value == DETAILS_EVENT
                                for kv in record.attributes):
                            outcomes["not_genai"] += 1
                            continue
                        attrs = attributes(record.attributes)
                        if record.body.WhichOneof("value") == "kvlist_value":  # content may travel in the body
                            body = any_value(record.body)
                            attrs = {**body, **attrs} if isinstance(body, dict) else attrs
                        if resource is None:
                            resource = attributes(rl.resource.attributes)
                        at = (record.time_unix_nano or record.observed_time_unix_nano) / 1e9
                        yield Call(attrs, resource, record.trace_id, record.span_id, at, at)
