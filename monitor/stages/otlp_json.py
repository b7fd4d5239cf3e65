"""``otlp_json`` payloads decoded by ``msgspec`` into structs of only the fields the mapping reads.

protobuf's ``json_format.ParseDict`` made an ``otlp_json`` message cost 30x the JSON path's decode
per conversation, and orjson's dict tree of the whole request (built and freed) was still a third of
an ``otlp_json`` decode: msgspec builds only the structs below (in C) and skips every other field
unbuilt. The walk mirrors the protobuf one in :mod:`monitor.stages.otlp` and yields the same
:class:`~monitor.stages.genai.Call` values. It reads what ``ParseDict`` read: OTLP/JSON's
lowerCamelCase field names (a request in protobuf's snake_case names is renamed first: a slower, rare
path), trace and span ids in hex (as OTLP/JSON requires; base64 is accepted too), 64-bit integers as
strings or numbers. A structure that is not OTLP raises :class:`InvalidEvent` (``malformed_otlp``).
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import orjson

from monitor.contracts.errors import InvalidEvent
from monitor.stages.genai import GENAI, INPUT, OUTPUT, READ, Call, key_kind

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_KINDS = {"stringValue": "s", "intValue": "i", "doubleValue": "d", "boolValue": "b", "bytesValue": "y",
          "arrayValue": "a", "kvlistValue": "k"}


# OTLP/JSON's field names (lowerCamelCase); a struct declares only what the walk reads; a list may be null
# (protobuf's JSON parser took null for empty)
class _Value(msgspec.Struct, frozen=True, gc=False):
    """An AnyValue; arrays and key-value lists stay dicts (rare, read with :func:`any_value`)."""

    stringValue: Any = None
    intValue: Any = None
    doubleValue: Any = None
    boolValue: Any = None
    bytesValue: Any = None
    arrayValue: Any = None
    kvlistValue: Any = None


_NO_VALUE = _Value()


class _Attribute(msgspec.Struct, gc=False):
    key: str
    value: _Value = _NO_VALUE


class _Resource(msgspec.Struct, gc=False):
    attributes: list[_Attribute] | None = None


class _Event(msgspec.Struct, gc=False):
    name: Any = ""
    attributes: list[_Attribute] | None = None


class _Span(msgspec.Struct, gc=False):
    attributes: list[_Attribute] | None = None
    events: list[_Event] | None = None
    traceId: Any = None
    spanId: Any = None
    startTimeUnixNano: Any = None
    endTimeUnixNano: Any = None


class _ScopeSpans(msgspec.Struct, gc=False):
    spans: list[_Span] | None = None


class _ResourceSpans(msgspec.Struct, gc=False):
    resource: _Resource | None = None
    scopeSpans: list[_ScopeSpans] | None = None


class TracesRequest(msgspec.Struct, gc=False):
    """The parts of an ``ExportTraceServiceRequest`` the mapping reads."""

    resourceSpans: list[_ResourceSpans] | None = None

    def empty(self) -> bool:
        return not self.resourceSpans


class _Record(msgspec.Struct, gc=False):
    attributes: list[_Attribute] | None = None
    body: _Value = _NO_VALUE
    eventName: Any = None
    traceId: Any = None
    spanId: Any = None
    timeUnixNano: Any = None
    observedTimeUnixNano: Any = None


class _ScopeLogs(msgspec.Struct, gc=False):
    logRecords: list[_Record] | None = None


class _ResourceLogs(msgspec.Struct, gc=False):
    resource: _Resource | None = None
    scopeLogs: list[_ScopeLogs] | None = None


class LogsRequest(msgspec.Struct, gc=False):
    """The parts of an ``ExportLogsServiceRequest`` the mapping reads."""

    resourceLogs: list[_ResourceLogs] | None = None

    def empty(self) -> bool:
        return not self.resourceLogs


def _camel_name(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(p[:1].upper() + p[1:] for p in rest)


def _camel(node: Any) -> Any:
    """Protobuf's snake_case field names as OTLP/JSON's (only field names are JSON keys in OTLP/JSON)."""
    if type(node) is dict:
        return {_camel_name(k) if "_" in k else k: _camel(v) for k, v in node.items()}
    if type(node) is list:
        return [_camel(v) for v in node]
    return node


def request_decoder(traces: bool) -> Callable[[bytes], TracesRequest | LogsRequest]:
    """Decodes an ``otlp_json`` request; raises :class:`msgspec.DecodeError` when it is not one."""
    decode: Callable[[bytes], TracesRequest | LogsRequest] = (
        msgspec.json.Decoder(TracesRequest).decode if traces else msgspec.json.Decoder(LogsRequest).decode)
    snake = b'"resource_spans"' if traces else b'"resource_logs"'

    def decoded(raw: bytes) -> TracesRequest | LogsRequest:
        request = decode(raw)
        if request.empty() and snake in raw:
            try:  # protobuf's field names (json_format with preserving_proto_field_name): renamed, then decoded
                request = decode(orjson.dumps(_camel(orjson.loads(raw))))
            except orjson.JSONDecodeError as exc:
                raise msgspec.DecodeError(str(exc)) from None
        return request
    return decoded


def _values(node: Any) -> list[Any]:
    """An ArrayValue's or KeyValueList's ``values`` (dicts: values inside a value are rare)."""
    if not isinstance(node, dict):
        raise TypeError("an array or kvlist value is not an object")
    value = node.get("values")
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError("values is not a list")
    return value


def any_value(v: Any) -> Any:
    """An OTLP/JSON AnyValue (a dict, inside an array or kvlist) as the Python value protobuf's
    ``AnyValue`` gives (monitor.stages.otlp.any_value)."""
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


def value(v: _Value) -> Any:
    """An attribute's :class:`_Value` as the Python value protobuf's ``AnyValue`` gives."""
    if v.stringValue is not None:
        return str(v.stringValue)
    if v.intValue is not None:
        return int(v.intValue)
    if v.doubleValue is not None:
        return float(v.doubleValue)
    if v.boolValue is not None:
        return bool(v.boolValue)
    if v.bytesValue is not None:
        return base64.b64decode(v.bytesValue)
    if v.arrayValue is not None:
        return [any_value(e) for e in _values(v.arrayValue)]
    if v.kvlistValue is not None:
        return {str(kv["key"]): any_value(kv.get("value", {})) for kv in _values(v.kvlistValue)}
    return None


def attributes(kvs: list[_Attribute] | None) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in kvs or ()}


def read(kvs: list[_Attribute] | None, keys: frozenset[str], kinds: dict[str, int]) -> tuple[dict[str, Any], bool]:
    """The attributes among ``keys`` (or flattened prompt / completion ones), and whether any is ``gen_ai.*``
    (``kinds`` as in :func:`monitor.stages.genai.key_kind`)."""
    found: dict[str, Any] = {}
    genai = False
    for kv in kvs or ():
        key = kv.key
        what = kinds.get(key)
        if what is None:
            what = key_kind(kinds, keys, key)
        if what:
            if what != READ:
                genai = True
            if what != GENAI:
                string = kv.value.stringValue
                found[key] = string if type(string) is str else value(kv.value)  # most are strings
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
    for rs in root.resourceSpans or ():
        resource: dict[str, Any] | None = None
        for ss in rs.scopeSpans or ():
            for span in ss.spans or ():
                attrs, genai = read(span.attributes, keys, kinds)
                events: list[tuple[str, dict[str, Any]]] = []
                if INPUT not in attrs and OUTPUT not in attrs:
                    events = [(e.name, attributes(e.attributes)) for e in span.events or ()
                              if str(e.name).startswith("gen_ai")]
                    if not genai and not events:
                        not_genai += 1
                        continue
                if resource is None:
                    resource = attributes(rs.resource.attributes) if rs.resource is not None else {}
                yield Call(attrs, resource, _id(span.traceId), _id(span.spanId), _seconds(span.startTimeUnixNano),
                           _seconds(span.endTimeUnixNano), events)
    if not_genai:
        outcomes["not_genai"] += not_genai


def _is_details(record: _Record) -> bool:
    return record.eventName == DETAILS_EVENT or any(
        kv.key == "event.name" and kv.value.stringValue == DETAILS_EVENT for kv in record.attributes or ())


def _logs(root: LogsRequest, keys: frozenset[str], kinds: dict[str, int], outcomes: Counter[str]
          ) -> Iterator[Call]:
    for rl in root.resourceLogs or ():
        resource: dict[str, Any] | None = None
        for sl in rl.scopeLogs or ():
            for record in sl.logRecords or ():
                if not _is_details(record):
                    outcomes["not_genai"] += 1
                    continue
                attrs, _ = read(record.attributes, keys, kinds)
                if record.body.kvlistValue is not None:  # content may travel in the body
                    body = value(record.body)
                    attrs = {**{k: v for k, v in body.items() if key_kind(kinds, keys, k) & READ}, **attrs}
                if resource is None:
                    resource = attributes(rl.resource.attributes) if rl.resource is not None else {}
                at = _seconds(record.timeUnixNano or record.observedTimeUnixNano)
                yield Call(attrs, resource, _id(record.traceId), _id(record.spanId), at, at)


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
