"""OTLP payloads from the events topic (the Collector's / Alloy's ``kafka`` exporter) -> convmon events.

One Kafka message is one ``ExportTraceServiceRequest`` (``otlp_spans`` topics) or
``ExportLogsServiceRequest`` (``otlp_logs`` topics), ``otlp_proto`` or ``otlp_json``, decoded with
the official ``opentelemetry-proto`` classes. It holds many conversations' calls and is unkeyed,
so the hot path re-produces each decoded event as convmon JSON under its conversation id.

Cheap for everything that is not a GenAI call: a span is looked at only if one of its attribute
keys starts with ``gen_ai.`` (or one of its events does), a log record only if it is the
``gen_ai.client.inference.operation.details`` event, and only the attributes the mapping reads are
converted (one pass over the keys). Calls whose content was not captured (instrumentations capture
none by default) are counted (``no_content``) and skipped. ``otlp_json`` is not parsed into protobuf
(protobuf's JSON parser cost 30x the JSON path): :mod:`monitor.stages.otlp_json` decodes only what the
mapping reads with msgspec.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

import msgspec
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import EndEvent, TurnEvent
from monitor.contracts.metrics import Metrics
from monitor.stages.content_refs import ContentResolver, resolved
from monitor.stages.genai import (
    CONVERSATION,
    GENAI,
    INPUT,
    MAX_ID,
    OUTPUT,
    READ,
    ByResource,
    Call,
    GenAiMapping,
    NoContent,
    conversation_id,
    key_kind,
)
from monitor.stages.genai_calls import Known, chat_turns, general_events
from monitor.stages.otlp_json import json_calls, request_decoder

Signal = Literal["traces", "logs"]
Encoding = Literal["otlp_proto", "otlp_json"]
DETAILS_EVENT = "gen_ai.client.inference.operation.details"


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


def _ascending(turns: dict[int, Any]) -> bool:
    """Whether the turns are in index order (nearly always): a loop, less than half the cost of sorting a copy."""
    previous = -1
    for index in turns:
        if index < previous:
            return False
        previous = index
    return True


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a message is decoded: it creates thousands of short-lived,
    acyclic containers (an ``otlp_json`` request's structs, attribute dicts, turns), and the
    collections they triggered were up to 45% of an ``otlp_json`` decode (bench otlp-decode, 10 calls
    per conversation). Nothing here makes cycles; the collector resumes at the next allocation after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def read(kvs: Iterable[KeyValue], keys: frozenset[str], kinds: dict[str, int]) -> tuple[dict[str, Any], bool]:
    """The attributes among ``keys`` (or flattened prompt / completion ones), and whether any is ``gen_ai.*``."""
    found: dict[str, Any] = {}
    genai = False
    for kv in kvs:
        key = kv.key
        what = kinds.get(key)
        if what is None:
            what = key_kind(kinds, keys, key)
        if what:
            if what != READ:
                genai = True
            if what != GENAI:
                value = kv.value
                found[key] = value.string_value or any_value(value)  # most are strings: one lookup
    return found, genai


class OtlpDecoder:
    """Decodes one events-topic message into convmon events; problems with single calls are returned, not raised."""

    def __init__(self, signal: Signal, encoding: Encoding, mapping: GenAiMapping, metrics: Metrics, *,
                 max_event_bytes: int, resolver: ContentResolver | None = None) -> None:
        self.resolver = resolver  # content by reference; the mapping must read the references (content_refs)
        self.signal = signal
        self.encoding = encoding
        self.mapping = mapping
        self.metrics = metrics
        self.max_event_bytes = max_event_bytes
        self._request = ExportTraceServiceRequest if signal == "traces" else ExportLogsServiceRequest
        self._json = request_decoder(signal == "traces")
        self._keys = mapping.keys
        self._kinds: dict[str, int] = {}  # see key_kind()
        self._counters: dict[str, Any] = {}  # convmon_otlp_records by outcome

    def parse(self, raw: bytes) -> Any:
        """The request: protobuf for ``otlp_proto``, :mod:`monitor.stages.otlp_json`'s structs for ``otlp_json``."""
        if not raw:
            raise InvalidEvent("empty", "the message has no value")
        if len(raw) > self.max_event_bytes:
            raise InvalidEvent("too_large", f"{len(raw)} bytes exceeds max_event_bytes={self.max_event_bytes}")
        try:
            if self.encoding == "otlp_json":
                return self._json(raw)
            request = self._request()
            request.ParseFromString(raw)
            return request
        except (DecodeError, msgspec.DecodeError) as exc:
            raise InvalidEvent("malformed_otlp", f"not an {self.encoding} {self._request.__name__}: {exc}"[:500]
                               ) from None

    def decode(self, raw: bytes) -> tuple[list[TurnEvent | EndEvent], list[InvalidEvent]]:
        """The events of every GenAI call in the message (one per conversation turn), and the calls that were
        not usable (``invalid_genai``: content that is not GenAI messages; ``invalid_schema``: an id too long)."""
        with gc_paused():
            return self._decode(self.parse(raw))

    def _decode(self, request: Any) -> tuple[list[TurnEvent | EndEvent], list[InvalidEvent]]:
        outcomes: Counter[str] = Counter()
        problems: list[InvalidEvent] = []
        # each conversation's turns by index: one message often repeats a history, keep each turn once
        by_conversation: dict[str, dict[int, TurnEvent]] = {}
        known: Known = {}
        by_resource: ByResource = {}  # metadata by resource, for this message
        ends: list[EndEvent] = []
        calls = (json_calls(request, self.signal == "traces", self._keys, self._kinds, outcomes)
                 if self.encoding == "otlp_json" else self._calls(request, outcomes))
        if self.resolver is not None:
            calls = resolved(self.resolver, calls, outcomes, self.metrics.otlp_content)
        mapping, mapped = self.mapping, 0
        for call in calls:
            attrs = call.attributes
            cid = attrs.get(CONVERSATION)  # conversation_id()'s usual case inline: it runs for every call
            cid = cid if type(cid) is str and cid.strip() else conversation_id(call, mapping)
            if cid is None:
                outcomes["no_conversation"] += 1
                continue
            if len(cid) > MAX_ID:  # as JSON input: dead-lettered, never cut to a prefix another id may share
                outcomes["invalid_conversation_id"] += 1
                problems.append(InvalidEvent("invalid_schema", f"span {call.span_id.hex()}: field 'conversation_id': "
                                             f"{len(cid)} characters, at most {MAX_ID}"))
                continue
            turns = by_conversation.get(cid)
            if turns is None:
                turns = by_conversation[cid] = {}
            try:
                if type(sent := attrs.get(INPUT)) is str and type(got := attrs.get(OUTPUT)) is str and \
                        chat_turns(call, cid, sent, got, mapping, turns, known, turns, ends, by_resource):
                    mapped += 1  # the usual call: its turns are in ``turns`` already
                    continue
                events = general_events(call, cid, mapping, turns, known)  # the rest: flattened, events, bad JSON
            except NoContent:
                outcomes["no_content"] += 1
                continue
            except ValueError as exc:  # a content attribute that is not what the conventions say
                outcomes["malformed"] += 1
                problems.append(InvalidEvent("invalid_genai", f"span {call.span_id.hex()}: {exc}"[:300]))
                continue
            mapped += 1
            for event in events:
                if type(event) is EndEvent:
                    ends.append(event)
                    continue
                index = event.turn_index  # type: ignore[union-attr]
                kept = turns.get(index)
                if kept is None or (event.span and not kept.span):  # type: ignore[union-attr]
                    turns[index] = event  # type: ignore[assignment]
        if mapped:
            outcomes["turns"] += mapped
        for outcome, n in outcomes.items():
            counter = self._counters.get(outcome)
            if counter is None:  # labels() costs more than decoding a conversation: once per outcome
                counter = self._counters[outcome] = self.metrics.otlp_records.labels(self.signal, outcome)
            counter.inc(n)
        out: list[TurnEvent | EndEvent] = []
        for turns in by_conversation.values():
            out += turns.values() if _ascending(turns) else (turns[i] for i in sorted(turns))
        return [*out, *ends], problems

    def _calls(self, request: Any, outcomes: Counter[str]) -> Iterable[Call]:
        keys, kinds = self._keys, self._kinds
        if self.signal == "traces":
            not_genai = 0
            for rs in request.resource_spans:
                resource: Mapping[str, Any] | None = None
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        attrs: dict[str, Any] = {}
                        genai = False
                        for kv in span.attributes:  # read() inline: this runs for every attribute of every span
                            key = kv.key
                            what = kinds.get(key)
                            if what is None:
                                what = key_kind(kinds, keys, key)
                            if what:
                                if what != READ:
                                    genai = True
                                if what != GENAI:
                                    value = kv.value
                                    attrs[key] = value.string_value or any_value(value)
                        events: list[tuple[str, dict[str, Any]]] = []
                        if INPUT not in attrs and OUTPUT not in attrs:
                            if len(span.events):
                                events = [(e.name, attributes(e.attributes)) for e in span.events
                                          if e.name.startswith("gen_ai")]
                            if not genai and not events:
                                not_genai += 1
                                continue
                        if resource is None:
                            resource = attributes(rs.resource.attributes)
                        yield Call(attrs, resource, span.trace_id, span.span_id,
                                   span.start_time_unix_nano / 1e9, span.end_time_unix_nano / 1e9, events)
            if not_genai:
                outcomes["not_genai"] += not_genai
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
                        attrs, _ = read(record.attributes, keys, kinds)
                        if record.body.WhichOneof("value") == "kvlist_value":  # content may travel in the body
                            attrs = {**read(record.body.kvlist_value.values, keys, kinds)[0], **attrs}
                        if resource is None:
                            resource = attributes(rl.resource.attributes)
                        at = (record.time_unix_nano or record.observed_time_unix_nano) / 1e9
                        yield Call(attrs, resource, record.trace_id, record.span_id, at, at)
