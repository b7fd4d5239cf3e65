"""The input format of the events topic: convmon JSON events (default), OpenAI Chat Completions logs (``openai``:
conversations as ``messages`` lists, or one message per event, beside convmon's own events) or OTLP GenAI telemetry.

Either way the hot path gets convmon events. Events re-produced under their conversation id
(to ``<prefix>rekeyed``) are always convmon JSON: for OTLP input that hop is where one
message of many conversations' spans becomes one keyed event per turn. The OTLP decoder (and
protobuf) is imported only when the setting selects it.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, Protocol

import orjson

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import Event, decode_input
from monitor.contracts.metrics import Metrics
from monitor.contracts.openai_chat import decode_chat, is_chat
from monitor.contracts.settings import MetricsSettings, OtelSettings


@dataclass
class Decoded:
    events: list[tuple[Event, bytes | None]] = field(default_factory=list)  # raw None: re-encode when re-produced
    problem: InvalidEvent | None = None  # part of the message was unusable: dead-letter it, keep the rest
    unknown_fields: tuple[str, ...] = ()  # top-level field names the contract does not know: ignored, counted
    skipped: tuple[str, ...] = ()  # roles of chat messages that are not turns (system, tool, ...): counted


class InputDecoder(Protocol):
    def decode(self, raw: bytes | None, *, rekeyed: bool, timestamp: float | None = None) -> Decoded:
        """Raises :class:`InvalidEvent` when nothing in the message is usable. ``timestamp``: the broker
        record's time, for events without their own."""
        ...


class JsonInput:
    def __init__(self, max_event_bytes: int) -> None:
        self.max_event_bytes = max_event_bytes

    def decode(self, raw: bytes | None, *, rekeyed: bool, timestamp: float | None = None) -> Decoded:
        decoded = decode_input(raw or b"", max_bytes=self.max_event_bytes, timestamp=timestamp)
        # An event that lost unknown fields or gained the broker's time is re-encoded if it is re-keyed: the
        # re-keyed copy keeps the first record's time and never carries the ignored values.
        keep_raw = not decoded.unknown_fields and not decoded.filled_timestamp
        return Decoded([(decoded.event, raw if keep_raw else None)], unknown_fields=decoded.unknown_fields)


class ChatInput:
    """OpenAI Chat Completions objects (monitor/contracts/openai_chat.py) and convmon JSON events alike."""

    repeating = False  # a message is logged once (the hot path skips its repeated-history check)

    def __init__(self, max_event_bytes: int) -> None:
        self.json = JsonInput(max_event_bytes)

    def decode(self, raw: bytes | None, *, rekeyed: bool, timestamp: float | None = None) -> Decoded:
        if rekeyed or not raw or len(raw) > self.json.max_event_bytes:  # re-keyed copies are convmon JSON
            return self.json.decode(raw, rekeyed=rekeyed, timestamp=timestamp)
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return self.json.decode(raw, rekeyed=rekeyed, timestamp=timestamp)  # its error, as for JSON input
        if not isinstance(obj, dict) or not is_chat(obj):
            return self.json.decode(raw, rekeyed=rekeyed, timestamp=timestamp)
        chat = decode_chat(obj, timestamp=time.time() if timestamp is None else timestamp)
        return Decoded([(event, None) for event in chat.events], unknown_fields=chat.unknown_fields,
                       skipped=chat.skipped)


_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


class UnknownFields:
    """Counts ignored input fields by name in ``convmon_input_unknown_fields_total{field}``: a bounded label
    (the first ``cap`` distinct names; later ones, and names that do not look like field names, as
    ``other``). Values are never looked at."""

    def __init__(self, metrics: Metrics, cap: int = 32) -> None:
        self.counter = metrics.input_unknown_fields
        self.cap = cap
        self.seen: set[str] = set()

    def label(self, name: str) -> str:
        if name in self.seen:
            return name
        if len(self.seen) >= self.cap or not _FIELD_NAME.match(name):
            return "other"
        self.seen.add(name)
        return name

    def count(self, names: tuple[str, ...]) -> None:
        if not names:  # nearly every event: no Counter to build
            return
        for label, n in Counter(self.label(name) for name in names).items():
            self.counter.labels(label).inc(n)


class OtlpInput:
    def __init__(self, otel: OtelSettings, metrics_settings: MetricsSettings, metrics: Metrics, *,
                 max_event_bytes: int) -> None:
        from monitor.stages.content_refs import build_resolver
        from monitor.stages.genai import GenAiMapping
        from monitor.stages.otlp import OtlpDecoder

        mapping = GenAiMapping(
            dimensions=tuple(metrics_settings.metric_dimensions),
            conversation_attributes=tuple(otel.otlp_conversation_attributes),
            dimension_attributes=tuple(otel.otlp_dimension_attributes.items()),
            thumbs_attribute=otel.otlp_thumbs_attribute, csat_attribute=otel.otlp_csat_attribute,
            end_attribute=otel.otlp_end_attribute, content_refs=otel.otlp_content_resolver is not None,
        )
        signal: Literal["traces", "logs"] = "traces" if otel.input_format == "otlp_traces" else "logs"
        self.otlp = OtlpDecoder(signal, otel.otlp_encoding, mapping, metrics, max_event_bytes=max_event_bytes,
                                resolver=build_resolver(otel))
        self.json = JsonInput(max_event_bytes)

    def decode(self, raw: bytes | None, *, rekeyed: bool, timestamp: float | None = None) -> Decoded:
        if rekeyed:
            return self.json.decode(raw, rekeyed=True, timestamp=timestamp)
        events, problems = self.otlp.decode(raw or b"")
        problem = None
        if problems:  # one dead letter for the message, named by its first problem (the rest in the detail)
            first = problems[0]
            more = f" (and {len(problems) - 1} more: {dict(Counter(p.reason for p in problems[1:]))})" \
                if len(problems) > 1 else ""
            problem = InvalidEvent(first.reason, first.detail + more)
        return Decoded([(e, None) for e in events], problem)


def build_input(otel: OtelSettings, metrics_settings: MetricsSettings, metrics: Metrics, *,
                max_event_bytes: int) -> InputDecoder:
    if otel.input_format == "json":
        return JsonInput(max_event_bytes)
    if otel.input_format == "openai":
        return ChatInput(max_event_bytes)
    return OtlpInput(otel, metrics_settings, metrics, max_event_bytes=max_event_bytes)
