"""``otlp_json`` payloads decoded by ``msgspec`` into structs of only the fields the mapping reads.

protobuf's ``json_format.ParseDict`` made an ``otlp_json`` message cost 30x the JSON path's decode
per conversation, and orjson's dict tree of the whole request (built and freed) was still a third of
an ``otlp_json`` decode: msgspec skips the fields no struct here declares in C, and leaves each
attribute's value as raw JSON (:class:`msgspec.Raw`) until the mapping reads it, so the values of the
attributes it does not read are never built. The walk mirrors the protobuf one in
:mod:`monitor.stages.otlp` and yields the same :class:`~monitor.stages.genai.Call` values. It reads
what ``ParseDict`` read: OTLP/JSON's lowerCamelCase field names (and protobuf's snake_case ones), trace
and span ids in hex (as OTLP/JSON requires; base64 is accepted too), 64-bit integers as strings or
numbers. A structure that is not OTLP raises :class:`InvalidEvent` (``malformed_otlp``).
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from monitor.contracts.errors import InvalidEvent
from monitor.stages.genai import GENAI, INPUT, OUTPUT, READ, Call, key_kind

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_KINDS = {"stringValue": "s", "string_value": "s", "intValue": "i", "int_value": "i", "doubleValue": "d",
          "double_value": "d", "boolValue": "b", "bool_value": "b", "bytesValue": "y", "bytes_value": "y",
          "arrayValue": "a", "array_value": "a", "kvlistValue": "k", "kvlist_value": "k"}
_EMPTY = msgspec.Raw(b"{}")  # an attribute without a value: AnyValue's default, no value
_value = msgspec.json.Decoder().decode  # an attribute's raw value -> the dict of its AnyValue


# Each struct declares only what the walk reads, under both OTLP/JSON's and protobuf's field names (the
# second, snake_case, one read when the first is absent); msgspec skips every other field without building it.
class _Attribute(msgspec.Struct, gc=False):
    key: str
    value: msgspec.Raw = _EMPTY


class _Resource(msgspec.Struct, gc=False):
    attributes: list[_Attribute] = []


class _Event(msgspec.Struct, gc=False):
    name: Any = ""
    attributes: list[_Attribute] = []


class _Span(msgspec.Struct, gc=False):
    attributes: list[_Attribute] = []
    events: list[_Event] = []
    traceId: Any = None
    trace_id: Any = None
    spanId: Any = None
    span_id: Any = None
    startTimeUnixNano: Any = None
    start_time_unix_nano: Any = None
    endTimeUnixNano: Any = None
    end_time_unix_nano: Any = None


class _ScopeSpans(msgspec.Struct, gc=False):
    spans: list[_Span] = []


class _ResourceSpans(msgspec.Struct, gc=False):
    resource: _Resource | None = None
    scopeSpans: list[_ScopeSpans] = []
    scope_spans: list[_ScopeSpans] = []


class TracesRequest(msgspec.Struct, gc=False):
    """The parts of an ``ExportTraceServiceRequest`` the mapping reads."""

    resourceSpans: list[_ResourceSpans] = []
    resource_spans: list[_ResourceSpans] = []


class _Record(msgspec.Struct, gc=False):
    attributes: list[_Attribute] = []
    body: msgspec.Raw = _EMPTY
    eventName: Any = None
    event_name: Any = None
    traceId: Any = None
    trace_id: Any = None
    spanId: Any = None
    span_id: Any = None
    timeUnixNano: Any = None
    time_unix_nano: Any = None
    observedTimeUnixNano: Any = None
    observed_time_unix_nano: Any = None


class _ScopeLogs(msgspec.Struct, gc=False):
    logRecords: list[_Record] = []
    log_records: list[_Record] = []


class _ResourceLogs(msgspec.Struct, gc=False):
    resource: _Resource | None = None
    scopeLogs: list[_ScopeLogs] = []
    scope_logs: list[_ScopeLogs] = []


class LogsRequest(msgspec.Struct, gc=False):
    """The parts of an ``ExportLogsServiceRequest`` the mapping reads."""

    resourceLogs: list[_ResourceLogs] = []
    resource_logs: list[_ResourceLogs] = []


def request_decoder(traces: bool) -> msgspec.json.Decoder[Any]:
    """Decodes an ``otlp_json`` request; raises :class:`msgspec.DecodeError` when it is not one."""
    return msgspec.json.Decoder(TracesRequest if traces else LogsRequest)


def _values(node: Mapping[str, Any]) -> list[Any]:
    """An ArrayValue's or KeyValueList's ``values`` (a dict: inside a value, decoded only when read)."""
    value = node.get("values")
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError("values is not a list")
    return value


def any_value(v: Any) -> Any:
    """An OTLP/JSON AnyValue (as a dict) as the Python value protobuf's ``AnyValue`` gives
    (monitor.stages.otlp.any_value)."""
    if not isinstance(v, dict):
        raise TypeError("an attribute value is not an object")
    for name, x in v.items():
        kind = _KINDS.get(name)
        if kind == "s":
            return str(x)
        if kind == "i":
            return int(x)
        if kind == "d":
            return float(x)
        if kind == "b":
            return bool(x)
        if kind == "y":
            return base64.b64decode(x)
        if kind == "a":
            return [any_value(e) for e in _values(x)]
        if kind == "k":
            return {str(kv["key"]): any_value(kv.get("value", {})) for kv in _values(x)}
    return None


def _attribute(raw: msgspec.Raw) -> Any:
    value = _value(raw)
    string = value.get("stringValue") if type(value) is dict else None  # most are strings
    return string if type(string) is str else any_value(value)


def attributes(kvs: list[_Attribute]) -> dict[str, Any]:
    return {kv.key: _attribute(kv.value) for kv in kvs}


def read(kvs: list[_Attribute], keys: frozenset[str], kinds: dict[str, int]) -> tuple[dict[str, Any], bool]:
    """The attributes among ``keys`` (or flattened prompt / completion ones), and whether any is ``gen_ai.*``
    (``kinds`` as in :func:`monitor.stages.genai.key_kind`); only their values are decoded."""
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
                found[key] = _attribute(kv.value)
    return found, genai


def _id(value: Any) -> bytes:
    if not value:
        return b""
    try:
        return bytes.fromhex(value)
    except ValueError:
        return base64.b64decode(value, validate=True)


def _seconds(value: Any) -> float:
    return int(value or 0) / 1e9


def _spans(root: TracesRequest, keys: frozenset[str], kinds: dict[str, int], outcomes: Counter[str]
           ) -> Iterator[Call]:
    not_genai = 0
    for rs in root.resourceSpans or root.resource_spans:
        resource: dict[str, Any] | None = None
        for ss in rs.scopeSpans or rs.scope_spans:
            for span in ss.spans:
                attrs, genai = read(span.attributes, keys, kinds)
                events: list[tuple[str, dict[str, Any]]] = []
                if INPUT not in attrs and OUTPUT not in attrs:
                    events = [(e.name, attributes(e.attributes)) for e in span.events
                              if str(e.name).startswith("gen_ai")]
                    if not genai and not events:
                        not_genai += 1
                        continue
                if resource is None:
                    resource = attributes(rs.resource.attributes) if rs.resource is not None else {}
                yield Call(attrs, resource, _id(span.traceId or span.trace_id), _id(span.spanId or span.span_id),
                           _seconds(span.startTimeUnixNano or span.start_time_unix_nano),
                           _seconds(span.endTimeUnixNano or span.end_time_unix_nano), events)
    if not_genai:
        outcomes["not_genai"] += not_genai


def _is_details(record: _Record) -> bool:
    if (record.eventName or record.event_name) == DETAILS_EVENT:
        return True
    return any(kv.key == "event.name" and _attribute(kv.value) == DETAILS_EVENT for kv in record.attributes)


def _logs(root: LogsRequest, keys: frozenset[str], kinds: dict[str, int], outcomes: Counter[str]
          ) -> Iterator[Call]:
    for rl in root.resourceLogs or root.resource_logs:
        resource: dict[str, Any] | None = None
        for sl in rl.scopeLogs or rl.scope_logs:
            for record in sl.logRecords or sl.log_records:
                if not _is_details(record):
                    outcomes["not_genai"] += 1
                    continue
                attrs, _ = read(record.attributes, keys, kinds)
                body = _value(record.body)
                if isinstance(body, dict) and (values := body.get("kvlistValue") or body.get("kvlist_value")):
                    content = {str(kv["key"]): any_value(kv.get("value", {})) for kv in _values(values)
                               if kind(kinds, keys, str(kv["key"])) & READ}  # content may travel in the body
                    attrs = {**content, **attrs}
                if resource is None:
                    resource = attributes(rl.resource.attributes) if rl.resource is not None else {}
                at = _seconds(record.timeUnixNano or record.time_unix_nano or record.observedTimeUnixNano
                              or record.observed_time_unix_nano)
                yield Call(attrs, resource, _id(record.traceId or record.trace_id),
                           _id(record.spanId or record.span_id), at, at)


def kind(kinds: dict[str, int], keys: frozenset[str], key: str) -> int:
    what = kinds.get(key)
    return key_kind(kinds, keys, key) if what is None else what


def json_calls(root: Any, traces: bool, keys: frozenset[str], kinds: dict[str, int], outcomes: Counter[str]
               ) -> Iterator[Call]:
    """The GenAI calls of an ``otlp_json`` request (decoded by :func:`request_decoder`); raises
    :class:`InvalidEvent` when it is not OTLP."""
    try:
        if traces and isinstance(root, TracesRequest):
            yield from _spans(root, keys, kinds, outcomes)
        elif not traces and isinstance(root, LogsRequest):
            yield from _logs(root, keys, kinds, outcomes)
        else:
            raise TypeError(f"expected a decoded otlp_json request, got {type(root).__name__}")
    except (TypeError, AttributeError, KeyError, ValueError) as exc:  # msgspec's errors are ValueErrors
        name = "ExportTraceServiceRequest" if traces else "ExportLogsServiceRequest"
        raise InvalidEvent("malformed_otlp", f"not an otlp_json {name}: {exc}"[:500]) from None
