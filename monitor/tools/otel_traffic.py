"""GenAI telemetry as a real instrumented app emits it, for tests and `convmon bench otlp-decode`.

A real OpenTelemetry SDK ``TracerProvider`` (and ``LoggerProvider``) records one span per chat
call with the GenAI semantic-convention attributes (each call repeats the history, as instrumented
clients do) under a non-GenAI HTTP parent span; the SDK's own OTLP encoders
(``opentelemetry-exporter-otlp-proto-common``) turn a batch into the ``ExportTraceServiceRequest`` /
``ExportLogsServiceRequest`` the Collector's kafka exporter would publish, as ``otlp_proto`` bytes or
``otlp_json`` (protobuf's JSON mapping with trace and span ids in hex, as OTLP/JSON requires).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, set_span_in_context

Encoding = Literal["otlp_proto", "otlp_json"]
DETAILS_EVENT = "gen_ai.client.inference.operation.details"


@dataclass
class Chat:
    """A conversation to trace: alternating user / assistant texts, starting with the user."""

    conversation_id: str
    texts: list[str]
    model: str = "gpt-4o-mini-2024-07-18"
    capture_content: bool = True
    feedback: dict[str, Any] = field(default_factory=dict)  # extra attributes on the last call (thumbs, end)


def _message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _call_attributes(chat: Chat, call: int) -> dict[str, Any]:
    history = [_message("system", "You are a helpful assistant.")]
    history += [_message("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(chat.texts[:2 * call + 1])]
    answer = chat.texts[2 * call + 1]
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.conversation.id": chat.conversation_id, "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": chat.model, "gen_ai.response.id": f"chatcmpl-{chat.conversation_id}-{call}",
        "gen_ai.usage.input_tokens": 10 * (call + 1), "gen_ai.usage.output_tokens": 12,
    }
    if chat.capture_content:
        attrs["gen_ai.input.messages"] = orjson.dumps(history).decode()
        attrs["gen_ai.output.messages"] = orjson.dumps([{**_message("assistant", answer),
                                                         "finish_reason": "stop"}]).decode()
    if call == len(chat.texts) // 2 - 1:
        attrs.update(chat.feedback)
    return attrs


class GenAiApp:
    """An instrumented chat app: real SDK providers, in-memory exporters, the SDK's OTLP encoders."""

    def __init__(self, service: str = "chat-web") -> None:
        resource = Resource.create({"service.name": service, "deployment.environment": "test"})
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.tracer = self.tracer_provider.get_tracer("convmon.tests.chat_app")
        self.logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.logger = self.logger_provider.get_logger("convmon.tests.chat_app")

    def trace(self, chats: Sequence[Chat], *, logs: bool = False, calls: Sequence[int] | None = None
              ) -> dict[str, list[str]]:
        """Record the calls (all by default) of ``chats``; returns each conversation's assistant span refs
        (trace-span hex) in call order."""
        refs: dict[str, list[str]] = {}
        for call in calls if calls is not None else range(max(len(c.texts) // 2 for c in chats)):
            # interleaved, as concurrent users are
            for chat in chats:
                if call >= len(chat.texts) // 2:
                    continue
                with self.tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER,
                                                       attributes={"http.request.method": "POST"}):
                    attrs = _call_attributes(chat, call)
                    with self.tracer.start_as_current_span(f"chat {attrs['gen_ai.request.model']}",
                                                           kind=SpanKind.CLIENT, attributes=attrs) as span:
                        ctx = span.get_span_context()
                        refs.setdefault(chat.conversation_id, []).append(f"{ctx.trace_id:032x}-{ctx.span_id:016x}")
                        if logs:
                            self.logger.emit(event_name=DETAILS_EVENT, attributes=attrs,
                                             context=set_span_in_context(span))
        return refs

    def take_traces(self, encoding: Encoding) -> bytes:
        spans = self.spans.get_finished_spans()
        self.spans.clear()
        return _bytes(encode_spans(spans), encoding)

    def take_logs(self, encoding: Encoding) -> bytes:
        records = self.logs.get_finished_logs()
        self.logs.clear()
        return _bytes(encode_logs(records), encoding)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                    else _hex_ids(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def _bytes(message: Any, encoding: Encoding) -> bytes:
    if encoding == "otlp_proto":
        return bytes(message.SerializeToString())
    return orjson.dumps(_hex_ids(json_format.MessageToDict(message)))


def conversation_texts(n_turn_pairs: int, seed: str) -> list[str]:
    out = []
    for i in range(n_turn_pairs):
        out.append(f"[{seed}] question {i}: how do I configure the exporter for topic {i}?")
        out.append(f"[{seed}] answer {i}: set the topic and the encoding in the kafka exporter, step {i}.")
    return out
