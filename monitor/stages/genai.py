"""OpenTelemetry GenAI semantic conventions -> convmon turn and end events, from plain attribute dicts.

One GenAI call (a span, or its ``gen_ai.client.inference.operation.details`` log event) carries the
chat history it sent (``gen_ai.input.messages``) and the answer (``gen_ai.output.messages``), both
JSON strings of ``{"role", "parts": [{"type": "text", "content"}]}`` (or the older ``content``
form, and the flattened ``gen_ai.prompt.<i>.content`` / ``gen_ai.completion.<i>.content``
attributes). Every call repeats the history, so a turn's index is its position in the history,
counting only user and assistant messages with text: the same turn gets the same index in every
call, and the sessionizer stores it once. System and tool messages are not turns.

No protobuf here: :mod:`monitor.stages.otlp` (and :mod:`monitor.stages.otlp_json`) walk the OTLP
payloads and hand over dicts of the attributes this module reads (:func:`read_keys`), nothing more:
converting every attribute of every span was most of the decode cost. This module holds the mapping and
the pieces of a call; :mod:`monitor.stages.genai_calls` turns whole calls into events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson

from monitor.contracts.events import Feedback, Role, TurnEvent
from monitor.contracts.trusted import trusted

CONVERSATION = "gen_ai.conversation.id"
INPUT, OUTPUT = "gen_ai.input.messages", "gen_ai.output.messages"
INPUT_REF, OUTPUT_REF = INPUT + "_ref", OUTPUT + "_ref"  # content stored elsewhere (monitor/stages/content_refs.py)
PROMPT, COMPLETION = "gen_ai.prompt", "gen_ai.completion"  # older semconv: span events / flattened attributes
RESPONSE_ID = "gen_ai.response.id"
MODELS = ("gen_ai.response.model", "gen_ai.request.model")
FLATTENED = (PROMPT + ".", COMPLETION + ".")
MAX_ID = 256
TRUE = {"true", "1", "yes", "up", "+1", "positive"}
FALSE = {"false", "0", "no", "down", "-1", "negative"}


@dataclass(frozen=True)
class GenAiMapping:
    """What the OTLP settings say about attribute names (monitor.contracts.settings.OtelSettings)."""

    dimensions: tuple[str, ...] = ("app", "locale", "model_version")
    conversation_attributes: tuple[str, ...] = ("session.id",)
    dimension_attributes: tuple[tuple[str, str], ...] = (("app", "service.name"),)
    thumbs_attribute: str | None = None
    csat_attribute: str | None = None
    end_attribute: str | None = None
    content_refs: bool = False  # read gen_ai.*.messages_ref: a content resolver is configured
    # derived once, read per call: each dimension's attribute names in order, every attribute the mapping reads
    dimension_names: tuple[tuple[str, tuple[str, ...]], ...] = field(init=False, repr=False, compare=False)
    keys: frozenset[str] = field(init=False, repr=False, compare=False)
    conversation_names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    dimension_keys: frozenset[str] = field(init=False, repr=False, compare=False)  # every name dimensions read
    plain: bool = field(init=False, repr=False, compare=False)  # no feedback or end attribute to read

    def __post_init__(self) -> None:
        mapped = dict(self.dimension_attributes)
        names = tuple((d, (mapped.get(d, d), *(MODELS if d == "model_version" else ()))) for d in self.dimensions)
        object.__setattr__(self, "dimension_names", names)
        object.__setattr__(self, "keys", read_keys(self))
        object.__setattr__(self, "conversation_names", (CONVERSATION, *self.conversation_attributes))
        object.__setattr__(self, "dimension_keys", frozenset(n for _, ns in names for n in ns))
        object.__setattr__(self, "plain", not (self.thumbs_attribute or self.csat_attribute or self.end_attribute))


def read_keys(m: GenAiMapping) -> frozenset[str]:
    """The span / log attributes the mapping reads (besides the flattened ``gen_ai.prompt.<i>.*`` ones)."""
    names = {CONVERSATION, INPUT, OUTPUT, RESPONSE_ID, *m.conversation_attributes, *(n for _, ns in m.dimension_names
                                                                                       for n in ns)}
    if m.content_refs:
        names |= {INPUT_REF, OUTPUT_REF}
    return frozenset(n for n in (*names, m.thumbs_attribute, m.csat_attribute, m.end_attribute) if n)


GENAI, READ = 1, 2  # a key's kind (key_kind): gen_ai.* (the span is looked at), read by the mapping; or both
MAX_KINDS = 4096  # keys remembered per decoder: instrumentations use a few dozen; a flood of unique ones is not kept


def key_kind(kinds: dict[str, int], keys: frozenset[str], key: str) -> int:
    """``key``'s kind, remembered in ``kinds`` (one per decoder): spans carry the same few dozen keys message
    after message, and one dict lookup per attribute replaced three string tests (a tenth of a decode)."""
    found = (READ if key in keys or key.startswith(FLATTENED) else 0) | (GENAI if key.startswith("gen_ai.") else 0)
    if len(kinds) < MAX_KINDS:
        kinds[key] = found
    return found


class Call(msgspec.Struct):
    """One GenAI call's telemetry: the attributes the mapping reads, its resource's, where it sits in a trace.
    (A struct: one per GenAI call, its ``__init__`` in C.)"""

    attributes: Mapping[str, Any]
    resource: Mapping[str, Any]
    trace_id: bytes
    span_id: bytes
    start: float  # epoch seconds
    end: float
    events: Sequence[tuple[str, Mapping[str, Any]]] = ()  # span events: (name, attributes)


class NoContent(Exception):
    """A GenAI call whose messages were not captured (content capture is off by default)."""


def conversation_id(call: Call, m: GenAiMapping) -> str | None:
    """The call's conversation, whole: one longer than ``MAX_ID`` is the caller's to reject (as JSON input
    does), never cut (two ids sharing a prefix would become one conversation)."""
    value = call.attributes.get(CONVERSATION)
    if type(value) is str and value.strip():  # the usual case
        return value
    for name in m.conversation_names:
        for attrs in (call.attributes, call.resource):
            value = attrs.get(name)
            if value is not None and (value if isinstance(value, str) else str(value)).strip():
                return str(value)
    return None


def message_text(message: Mapping[str, Any]) -> str:
    parts = message.get("parts")
    if isinstance(parts, list):
        if len(parts) == 1 and isinstance(one := parts[0], dict) and isinstance(text := one.get("content"), str) \
                and one.get("type", "text") == "text":  # the usual single text part, without the lists
            return text.strip()
        texts = [str(p.get("content", "")) for p in parts if isinstance(p, dict) and p.get("type", "text") == "text"]
        return "\n".join(t for t in texts if t).strip()
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):  # OpenAI-style content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict)).strip()
    return ""


def messages(value: Any, where: str) -> list[Any]:
    """A list whose dict items are messages (callers skip the rest)."""
    if type(value) is str or isinstance(value, str | bytes):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{where} is not JSON: {exc}") from None
    if type(value) is list:
        return value
    if isinstance(value, dict):  # a single message (old completion events)
        return [value]
    if not isinstance(value, list):
        raise ValueError(f"{where} is not a list of messages")
    return value


def flattened(attrs: Mapping[str, Any], prefix: str) -> list[Mapping[str, Any]]:
    """``gen_ai.prompt.0.role`` / ``gen_ai.prompt.0.content`` ... as messages, in index order."""
    found: dict[int, dict[str, Any]] = {}
    dotted = prefix + "."
    for key, value in attrs.items():
        if key.startswith(dotted):
            index, _, field = key[len(dotted):].partition(".")
            if index.isdigit() and field in ("role", "content"):
                found.setdefault(int(index), {})[field] = value
    return [found[i] for i in sorted(found)]


ByResource = dict[int, tuple[Mapping[str, Any], dict[str, str]]]  # id(resource) -> resource (kept alive), metadata


def call_dimensions(call: Call, m: GenAiMapping, by_resource: ByResource | None = None) -> dict[str, str]:
    """The call's metric dimensions. With ``by_resource`` (one message's), a call whose own attributes name
    no dimension shares the dict of the first such call of its resource: per call, this dict was a tenth
    of the mapping's cost (turns never change their metadata)."""
    attributes, resource = call.attributes, call.resource
    shared = by_resource is not None and m.dimension_keys.isdisjoint(attributes)
    if shared and (known := by_resource.get(id(resource))) is not None:  # type: ignore[union-attr]
        return known[1]
    out: dict[str, str] = {}
    for dim, names in m.dimension_names:
        for name in names:
            value = attributes.get(name)
            if value is None:
                value = resource.get(name)
            if value is not None and (text := value if type(value) is str else str(value)):
                out[dim] = text[:MAX_ID]
                break
    if shared:
        by_resource[id(resource)] = (resource, out)  # type: ignore[index]  # the resource kept: its id stays its own
    return out


def flag(value: Any) -> bool | None:
    text = str(value).strip().lower()
    return True if text in TRUE else False if text in FALSE else None


def call_feedback(call: Call, m: GenAiMapping) -> Feedback | None:
    thumbs = csat = None
    if m.thumbs_attribute and m.thumbs_attribute in call.attributes:
        vote = flag(call.attributes[m.thumbs_attribute])
        thumbs = None if vote is None else "up" if vote else "down"
    if m.csat_attribute and m.csat_attribute in call.attributes:
        try:
            value = int(float(call.attributes[m.csat_attribute]))
            csat = value if 1 <= value <= 5 else None
        except (TypeError, ValueError):
            csat = None
    return Feedback(thumbs=thumbs, csat=csat) if thumbs or csat else None


_NO_TRACE, _NO_SPAN = bytes(16), bytes(8)


def span_ref(trace_id: bytes, span_id: bytes) -> str | None:
    if len(trace_id) != 16 or len(span_id) != 8 or trace_id == _NO_TRACE or span_id == _NO_SPAN:
        return None
    return f"{trace_id.hex()}-{span_id.hex()}"


# every turn's fields-set (all fields are set): one set shared by all, as TurnEvent is frozen and pydantic
# copies the set before it changes one (model_copy), so no turn's set is ever changed in place
_TURN_FIELDS = set(TurnEvent.model_fields)


def new_turn(cid: str, index: int, role: Role, text: str, timestamp: float, metadata: dict[str, str],
             span: str | None = None, response_id: str | None = None) -> TurnEvent:
    """Built without validation: every field is valid by construction here (non-empty text, bounded ids,
    a known role, finite times), validation was most of the decode cost, and even pydantic's
    ``model_construct`` costs 4x this (tests/stages/test_otlp_input.py checks it equals a validated event)."""
    return trusted(TurnEvent, {"type": "turn", "conversation_id": cid, "turn_index": index, "role": role,
                               "text": text, "timestamp": timestamp, "feedback": None, "metadata": metadata,
                               "span": span, "response_id": response_id}, _TURN_FIELDS)
