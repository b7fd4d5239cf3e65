"""``otlp_json`` payloads walked as the dicts ``orjson`` gives, not parsed into protobuf first.

protobuf's ``json_format.ParseDict`` made an ``otlp_json`` message cost 30x the JSON path's decode
per conversation; walking the dicts reads only what the GenAI mapping needs, like the protobuf walk
in :mod:`monitor.stages.otlp`, and yields the same :class:`~monitor.stages.genai.Call` values. It
reads what ``ParseDict`` read: OTLP/JSON's lowerCamelCase field names (and protobuf's snake_case
ones), trace and span ids in hex (as OTLP/JSON requires; base64 is accepted too), 64-bit integers as
strings or numbers. A structure that is not OTLP raises :class:`InvalidEvent` (``malformed_otlp``).
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from monitor.contracts.errors import InvalidEvent
from monitor.stages.genai import GENAI, INPUT, OUTPUT, READ, Call, key_kind

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_SNAKE = {"resourceSpans": "resource_spans", "scopeSpans": "scope_spans", "resourceLogs": "resource_logs",
          "scopeLogs": "scope_logs", "logRecords": "log_records", "traceId": "trace_id", "spanId": "span_id",
          "startTimeUnixNano": "start_time_unix_nano", "endTimeUnixNano": "end_time_unix_nano",
          "timeUnixNano": "time_unix_nano", "observedTimeUnixNano": "observed_time_unix_nano",
          "eventName": "event_name"}
_KINDS = {"stringValue": "s", "string_value": "s", "intValue": "i", "int_value": "i", "doubleValue": "d",
          "double_value": "d", "boolValue": "b", "bool_value": "b", "bytesValue": "y", "bytes_value": "y",
          "arrayValue": "a", "array_value": "a", "kvlistValue": "k", "kvlist_value": "k"}


_NO_VALUE: dict[str, Any] = {}  # an attribute without a value (never changed)


def _get(node: Mapping[str, Any], name: str) -> Any:
    value = node.get(name)
    return node.get(_SNAKE[name]) if value is None and name in _SNAKE else value


def _list(node: Mapping[str, Any], name: str) -> list[Any]:
    value = _get(node, name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"{name} is not a list")
    return value


def any_value(v: Any) -> Any:
    """An OTLP/JSON AnyValue as the Python value protobuf's ``AnyValue`` gives (monitor.stages.otlp.any_value)."""
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
            return [any_value(e) for e in _list(x, "values")]
        if kind == "k":
            return attributes(_list(x, "values"))
    return None


def attributes(kvs: list[Any]) -> dict[str, Any]:
    return {str(kv["key"]): any_value(kv.get("value", {})) for kv in kvs}


def read(kvs: list[Any], keys: frozenset[str], kinds: dict[str, int]) -> tuple[dict[str, Any], bool]:
    """The attributes among ``keys`` (or flattened prompt / completion ones), and whether any is ``gen_ai.*``
    (``kinds`` as in :func:`monitor.stages.genai.key_kind`)."""
    found: dict[str, Any] = {}
    genai = False
    for kv in kvs:
        key = kv["key"]
        what = kinds.get(key)
        if what is None:
            what = key_kind(kinds, keys, key)
        if what:
            if what != READ:
                genai = True
            if what != GENAI:
                value = kv.get("value", {})
                string = value.get("stringValue")
                found[key] = string if type(string) is str else any_value(value)
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


def _spans(root: Mapping[str, Any], keys: frozenset[str], kinds: dict[str, int], outcomes: Counter[str]
           ) -> Iterator[Call]:
    not_genai = 0
    for rs in _list(root, "resourceSpans"):
        resource: dict[str, Any] | None = None
        for ss in _list(rs, "scopeSpans"):
            for span in _list(ss, "spans"):
                raw_attrs = span.get("attributes") or []
                attrs: dict[str, Any] = {}
                genai = False
                for kv in raw_attrs if type(raw_attrs) is list else _list(span, "attributes"):
                    key = kv["key"]  # read() inline: this runs for every attribute of every span
                    what = kinds.get(key)
                    if what is None:
                        what = key_kind(kinds, keys, key)
                    if what:
                        if what != READ:
                            genai = True
                        if what != GENAI:
                            value = kv.get("value", _NO_VALUE)
                            string = value.get("stringValue") if type(value) is dict else None
                            attrs[key] = string if type(string) is str else any_value(value)
                events: list[tuple[str, dict[str, Any]]] = []
                if INPUT not in attrs and OUTPUT not in attrs:
                    if span.get("events"):
                        events = [(e.get("name", ""), attributes(_list(e, "attributes"))) for e in _list(span, "events")
                                  if str(e.get("name", "")).startswith("gen_ai")]
                    if not genai and not events:
                        not_genai += 1
                        continue
                if resource is None:
                    resource = attributes(_list(rs.get("resource") or {}, "attributes"))
                get = span.get  # OTLP/JSON's names first, protobuf's snake_case ones (_get) when they are absent
                yield Call(attrs, resource, _id(get("traceId") or _get(span, "traceId")),
                           _id(get("spanId") or _get(span, "spanId")),
                           int(get("startTimeUnixNano") or _get(span, "startTimeUnixNano") or 0) / 1e9,
                           int(get("endTimeUnixNano") or _get(span, "endTimeUnixNano") or 0) / 1e9, events)
    if not_genai:
        outcomes["not_genai"] += not_genai


def _is_details(record: Mapping[str, Any]) -> bool:
    if _get(record, "eventName") == DETAILS_EVENT:
        return True
    return any(kv.get("key") == "event.name" and (kv.get("value") or {}).get("stringValue") == DETAILS_EVENT
               for kv in _list(record, "attributes"))


def _logs(root: Mapping[str, Any], keys: frozenset[str], kinds: dict[str, int], outcomes: Counter[str]
          ) -> Iterator[Call]:
    for rl in _list(root, "resourceLogs"):
        resource: dict[str, Any] | None = None
        for sl in _list(rl, "scopeLogs"):
            for record in _list(sl, "logRecords"):
                if not _is_details(record):
                    outcomes["not_genai"] += 1
                    continue
                attrs, _ = read(_list(record, "attributes"), keys, kinds)
                body = record.get("body")
                if isinstance(body, dict) and ("kvlistValue" in body or "kvlist_value" in body):
                    values = body.get("kvlistValue") or body.get("kvlist_value") or {}
                    attrs = {**read(_list(values, "values"), keys, kinds)[0], **attrs}  # content may travel in the body
                if resource is None:
                    resource = attributes(_list(rl.get("resource") or {}, "attributes"))
                at = _seconds(_get(record, "timeUnixNano") or _get(record, "observedTimeUnixNano"))
                yield Call(attrs, resource, _id(_get(record, "traceId")), _id(_get(record, "spanId")), at, at)


def json_calls(root: Any, traces: bool, keys: frozenset[str], kinds: dict[str, int], outcomes: Counter[str]
               ) -> Iterator[Call]:
    """The GenAI calls of an ``otlp_json`` request; raises :class:`InvalidEvent` when it is not OTLP."""
    try:
        if not isinstance(root, dict):
            raise TypeError(f"expected a JSON object, got {type(root).__name__}")
        yield from (_spans if traces else _logs)(root, keys, kinds, outcomes)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        kind = "ExportTraceServiceRequest" if traces else "ExportLogsServiceRequest"
        raise InvalidEvent("malformed_otlp", f"not an otlp_json {kind}: {exc}"[:500]) from None
