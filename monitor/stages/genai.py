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
converting every attribute of every span was most of the decode cost.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel

from monitor.contracts.events import EndEvent, Feedback, Role, TurnEvent

CONVERSATION = "gen_ai.conversation.id"
INPUT, OUTPUT = "gen_ai.input.messages", "gen_ai.output.messages"
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
    # derived once, read per call: each dimension's attribute names in order, every attribute the mapping reads
    dimension_names: tuple[tuple[str, tuple[str, ...]], ...] = field(init=False, repr=False, compare=False)
    keys: frozenset[str] = field(init=False, repr=False, compare=False)
    conversation_names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    plain: bool = field(init=False, repr=False, compare=False)  # no feedback or end attribute to read

    def __post_init__(self) -> None:
        mapped = dict(self.dimension_attributes)
        names = tuple((d, (mapped.get(d, d), *(MODELS if d == "model_version" else ()))) for d in self.dimensions)
        object.__setattr__(self, "dimension_names", names)
        object.__setattr__(self, "keys", read_keys(self))
        object.__setattr__(self, "conversation_names", (CONVERSATION, *self.conversation_attributes))
        object.__setattr__(self, "plain", not (self.thumbs_attribute or self.csat_attribute or self.end_attribute))


def read_keys(m: GenAiMapping) -> frozenset[str]:
    """The span / log attributes the mapping reads (besides the flattened ``gen_ai.prompt.<i>.*`` ones)."""
    names = {CONVERSATION, INPUT, OUTPUT, RESPONSE_ID, *m.conversation_attributes, *(n for _, ns in m.dimension_names
                                                                                       for n in ns)}
    return frozenset(n for n in (*names, m.thumbs_attribute, m.csat_attribute, m.end_attribute) if n)


@dataclass(slots=True)
class Call:
    """One GenAI call's telemetry: the attributes the mapping reads, its resource's, where it sits in a trace."""

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
    value = call.attributes.get(CONVERSATION)
    if type(value) is str and value.strip():  # the usual case
        return value[:MAX_ID]
    for name in m.conversation_names:
        for attrs in (call.attributes, call.resource):
            value = attrs.get(name)
            if value is not None and (value if isinstance(value, str) else str(value)).strip():
                return str(value)[:MAX_ID]
    return None


def _text(message: Mapping[str, Any]) -> str:
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


def _messages(value: Any, where: str) -> list[Any]:
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


def _flattened(attrs: Mapping[str, Any], prefix: str) -> list[Mapping[str, Any]]:
    """``gen_ai.prompt.0.role`` / ``gen_ai.prompt.0.content`` ... as messages, in index order."""
    found: dict[int, dict[str, Any]] = {}
    dotted = prefix + "."
    for key, value in attrs.items():
        if key.startswith(dotted):
            index, _, field = key[len(dotted):].partition(".")
            if index.isdigit() and field in ("role", "content"):
                found.setdefault(int(index), {})[field] = value
    return [found[i] for i in sorted(found)]


Known = dict[str, tuple[str, int]]  # conversation -> its last input JSON array in this message without the closing
# "]", and the turns in it


def _tail(value: str, known: tuple[str, int] | None) -> tuple[str, int] | None:
    """A later call repeats the history of an earlier one and appends to it: when ``value`` extends the
    conversation's previous input JSON, the JSON array of only the appended messages and the turn index
    they start at, so a conversation's history is parsed once per message, not once per call."""
    if known is None:
        return None
    head, turns = known  # the previous input JSON array without its closing "]"
    if not value.startswith(head):
        return None
    rest = value[len(head):]
    if rest[:1].isspace():
        rest = rest.lstrip()
    first = rest[:1]
    if first == ",":
        return "[" + rest[1:], turns
    if first == "]":
        return "[" + rest, turns
    return None


def history_and_answer(call: Call, known: tuple[str, int] | None = None
                       ) -> tuple[list[Any], list[Any], int]:
    """The messages sent (all, or only those after the ``known`` earlier input) and received, from whichever
    convention the instrumentation used, and the turn index of the first message returned as sent. Items
    that are not JSON objects are left in the lists: callers skip them."""
    a = call.attributes
    if INPUT in a or OUTPUT in a:
        sent, first = a.get(INPUT), 0
        if isinstance(sent, str) and (tail := _tail(sent, known)) is not None:
            sent, first = tail
        return (_messages(sent, INPUT) if sent is not None else [],
                _messages(a[OUTPUT], OUTPUT) if OUTPUT in a else [], first)
    history: list[Any] = _flattened(a, PROMPT)
    answer: list[Any] = _flattened(a, COMPLETION)
    for name, event in call.events:  # gen_ai.content.prompt / gen_ai.content.completion span events
        if PROMPT in event:
            history = _messages(event[PROMPT], f"span event {name} {PROMPT}")
        if COMPLETION in event:
            answer = _messages(event[COMPLETION], f"span event {name} {COMPLETION}")
    if not history and not answer:
        raise NoContent
    return history, answer, 0


def _dimensions(call: Call, m: GenAiMapping) -> dict[str, str]:
    out: dict[str, str] = {}
    attributes, resource = call.attributes, call.resource
    for dim, names in m.dimension_names:
        for name in names:
            value = attributes.get(name)
            if value is None:
                value = resource.get(name)
            if value is not None and str(value):
                out[dim] = str(value)[:MAX_ID]
                break
    return out


def _flag(value: Any) -> bool | None:
    text = str(value).strip().lower()
    return True if text in TRUE else False if text in FALSE else None


def _feedback(call: Call, m: GenAiMapping) -> Feedback | None:
    thumbs = csat = None
    if m.thumbs_attribute and m.thumbs_attribute in call.attributes:
        vote = _flag(call.attributes[m.thumbs_attribute])
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


_TURN_FIELDS = frozenset(TurnEvent.model_fields)
_new = object.__new__
_set = object.__setattr__
_slots = BaseModel.__dict__
_set_fields, _set_extra, _set_private = (_slots[n].__set__ for n in (
    "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"))


def _turn(cid: str, index: int, role: Role, text: str, timestamp: float, metadata: dict[str, str],
          span: str | None = None, response_id: str | None = None) -> TurnEvent:
    """Built without validation: every field is valid by construction here (non-empty text, bounded ids,
    a known role, finite times), validation was most of the decode cost, and even pydantic's
    ``model_construct`` costs 4x this (tests/stages/test_otlp_input.py checks it equals a validated event)."""
    event = _new(TurnEvent)
    _set(event, "__dict__", {"type": "turn", "conversation_id": cid, "turn_index": index, "role": role, "text": text,
                             "timestamp": timestamp, "feedback": None, "metadata": metadata, "span": span,
                             "response_id": response_id})
    _set_fields(event, set(_TURN_FIELDS))
    _set_extra(event, None)
    _set_private(event, None)
    return event


def chat_turns(call: Call, cid: str, sent: str, got: str, m: GenAiMapping, seen: Container[int],
               known: Known | None, out: dict[int, TurnEvent]) -> bool:
    """:func:`call_events` for the usual call, its input and output messages (``sent``, ``got``) JSON strings
    and no feedback or end attribute configured (``m.plain``), in one function that puts the turns in
    ``out`` by index: this runs for every call, and the helpers' calls, checks and lists were a third of
    its cost. False, having done nothing, for anything else: the general path handles that."""
    index, body = 0, sent
    if known is not None and (prior := known.get(cid)) is not None and sent.startswith(head := prior[0]):
        rest = sent[len(head):]  # what this call appends to the conversation's previous input
        if rest[:1].isspace():
            rest = rest.lstrip()
        if rest[:1] == ",":
            body, index = "[" + rest[1:], prior[1]
        elif rest[:1] == "]":
            body, index = "[" + rest, prior[1]
    try:
        history, answer = orjson.loads(body), orjson.loads(got)
    except orjson.JSONDecodeError:
        return False
    if type(history) is not list or type(answer) is not list:
        return False
    metadata = _dimensions(call, m)
    start = call.start
    for message in history:
        if type(message) is dict and ((role := message.get("role")) == "user" or role == "assistant"):
            if type(parts := message.get("parts")) is list and len(parts) == 1 and type(one := parts[0]) is dict \
                    and type(text := one.get("content")) is str and one.get("type", "text") == "text":
                text = text.strip()  # the usual single text part: _text's first case, inline
            else:
                text = _text(message)
            if text:
                if index not in seen:
                    out[index] = _turn(cid, index, role, text, start, metadata)
                index += 1
    if known is not None:
        if sent[-1:] != "]":
            sent = sent.rstrip()
        if sent[-1:] == "]":
            known[cid] = (sent[:-1], index)
    for message in answer:  # several choices (n > 1): the first is the one the user saw
        if type(message) is dict and message.get("role", "assistant") == "assistant" and (text := _text(message)):
            ref = span_ref(call.trace_id, call.span_id)
            if (kept := out.get(index)) is None or (ref and not kept.span):  # the answer's span over a repeat's
                response = call.attributes.get(RESPONSE_ID)
                out[index] = _turn(cid, index, "assistant", text, call.end, metadata, ref,
                                   str(response)[:128] if response else None)
            return True
    if index == 0:
        raise NoContent
    return True


def call_events(call: Call, cid: str, m: GenAiMapping, seen: Container[int] | None = None,
                known: Known | None = None
                ) -> list[TurnEvent | EndEvent]:
    """The turns of one call (history at its positions, the first answer after them) and, when the
    configured end attribute says so, an end event counting them. History turns whose index is in
    ``seen`` (already taken from this message) are not built again; ``known`` (per message) lets a call
    parse only the history its conversation's previous call did not send. Raises :class:`NoContent`."""
    attrs = call.attributes
    turns: dict[int, TurnEvent] = {}
    if m.plain and type(sent := attrs.get(INPUT)) is str and type(got := attrs.get(OUTPUT)) is str and chat_turns(
            call, cid, sent, got, m, () if seen is None else seen, known, turns):
        return list(turns.values())
    ended = m.end_attribute is not None and _flag(attrs.get(m.end_attribute)) is True
    feedback = _feedback(call, m) if m.thumbs_attribute or m.csat_attribute else None
    try:
        history, answer, index = history_and_answer(call, known.get(cid) if known is not None else None)
    except NoContent:
        if ended or feedback:  # a content-less span can still end the conversation or carry its feedback
            return [EndEvent(type="end", conversation_id=cid, timestamp=call.end, feedback=feedback)]
        raise
    metadata = _dimensions(call, m)
    out: list[TurnEvent | EndEvent] = []
    start = call.start
    for message in history:
        if type(message) is dict and ((role := message.get("role")) == "user" or role == "assistant") \
                and (text := _text(message)):
            if seen is None or index not in seen:
                out.append(_turn(cid, index, role, text, start, metadata))
            index += 1
    if known is not None and type(sent := attrs.get(INPUT)) is str and (sent := sent.rstrip()).endswith("]"):
        known[cid] = (sent[:-1], index)
    for message in answer:  # several choices (n > 1): the first is the one the user saw
        if type(message) is dict and message.get("role", "assistant") == "assistant" and (text := _text(message)):
            response = attrs.get(RESPONSE_ID)
            out.append(_turn(cid, index, "assistant", text, call.end, metadata, span_ref(call.trace_id, call.span_id),
                             str(response)[:128] if response else None))
            index += 1
            break
    if index == 0:
        raise NoContent
    if feedback and out:
        out[-1] = out[-1].model_copy(update={"feedback": feedback})
    if ended:
        out.append(EndEvent(type="end", conversation_id=cid, timestamp=call.end, turn_count=index))
    return out
