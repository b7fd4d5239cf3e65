"""Input contract: turn events, end events and finished conversations, decoded from JSON bytes.

Agents receive raw bytes and call :func:`decode_input` themselves, because a faust agent dies on a
decode error; every failure becomes an :class:`InvalidEvent` with a bounded ``reason`` code, the
failing field and a detail, which the caller sends to the dead-letter topic with the original bytes.

The contract (docs/input.md) is forgiving where that loses nothing and strict where a coercion
could mislead: unknown top-level fields (and unknown fields of a conversation's turns) are ignored
and reported by name, never kept; a missing ``timestamp`` is the broker record's time; integers
must be JSON integers (``"turn_index": "0"`` is rejected, not silently read as 0).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, StrictInt, ValidationError, field_validator

from monitor.contracts.errors import InvalidEvent

Role = Literal["user", "assistant", "system"]
ConversationId = Annotated[str, Field(min_length=1, max_length=256)]
# The OpenTelemetry span that produced an assistant turn, ``<trace id>-<span id>`` in lower-case hex
# (W3C trace context widths): evaluation events are parented to it (monitor/stages/evaluations.py).
SpanRef = Annotated[str, Field(pattern=r"^[0-9a-f]{32}-[0-9a-f]{16}$")]
ResponseId = Annotated[str, Field(min_length=1, max_length=128)]


def scalar_id(value: Any) -> Any:
    """An id of any JSON scalar type as a string (``42`` -> ``"42"``, ``true`` -> ``"true"``): producers' ids are
    often numbers, and a number read as its JSON text cannot mislead. Lists, objects and null stay errors."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return orjson.dumps(value).decode()
    return value


def _to_epoch(value: Any) -> Any:
    """Accept epoch seconds or ISO-8601 strings; store epoch seconds (float)."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return value  # let pydantic report the type error on the field
    return value


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Feedback(Record):
    """Explicit user feedback: a thumbs vote and/or a 1-5 CSAT answer."""

    thumbs: Literal["up", "down"] | None = None
    csat: StrictInt | None = Field(default=None, ge=1, le=5)


class TurnEvent(Record):
    type: Literal["turn"] = "turn"
    conversation_id: ConversationId
    turn_index: StrictInt = Field(ge=0)
    role: Role
    text: str = Field(min_length=1)
    timestamp: FiniteFloat
    feedback: Feedback | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    span: SpanRef | None = None  # optional: the producing span (OTLP input sets it on assistant turns)
    response_id: ResponseId | None = None  # optional: gen_ai.response.id of an assistant turn

    _epoch = field_validator("timestamp", mode="before")(_to_epoch)
    _id = field_validator("conversation_id", mode="before")(scalar_id)


class EndEvent(Record):
    type: Literal["end"]
    conversation_id: ConversationId
    timestamp: FiniteFloat
    feedback: Feedback | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    # How many turns the conversation has (indices 0..turn_count-1): it closes when all are present,
    # so events may arrive in any order (unkeyed producers). Optional; without it, see allowed_lateness_s.
    turn_count: StrictInt | None = Field(default=None, ge=1, le=1_000_000)
    # Ground truth rubric items, set only by `convmon simulate` so the simulated judge can
    # stand in for an LLM; real producers never set it.
    simulated_truth: list[str] | None = None

    _epoch = field_validator("timestamp", mode="before")(_to_epoch)
    _id = field_validator("conversation_id", mode="before")(scalar_id)


class Turn(Record):
    index: StrictInt = Field(ge=0)
    role: Role
    text: str = Field(min_length=1)
    timestamp: FiniteFloat | None = None
    span: SpanRef | None = None
    response_id: ResponseId | None = None


class Rejection(Record):
    """A turn of the conversation that was rejected (dead-lettered): which one, which field, why."""

    turn_index: StrictInt | None = Field(default=None, ge=0)
    field: str | None = Field(default=None, max_length=64)
    reason: str = Field(max_length=64)

    def describe(self) -> str:
        turn = "a turn" if self.turn_index is None else f"turn {self.turn_index}"
        return f"{turn} was rejected ({self.reason}" + (f", field {self.field})" if self.field else ")")


class RejectedTurn(Record):
    """A marker on convmon's re-keyed topic: a turn of this conversation was rejected by the worker that read it,
    which was not the conversation's writer; the writer marks the conversation incomplete."""

    type: Literal["rejected"]
    conversation_id: ConversationId
    rejection: Rejection
    timestamp: FiniteFloat


class Conversation(Record):
    """A finished conversation: what the route, judge and classify stages consume."""

    type: Literal["conversation"] = "conversation"
    conversation_id: ConversationId
    turns: list[Turn] = Field(min_length=1)
    feedback: Feedback | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    started_at: FiniteFloat | None = None
    ended_at: FiniteFloat | None = None
    end_reason: Literal["end", "idle", "producer"] = "producer"
    truncated: bool = False
    simulated_truth: list[str] | None = None
    incomplete: Rejection | None = None  # a turn was rejected: scored only with incomplete_conversations=score

    _epoch = field_validator("started_at", "ended_at", mode="before")(_to_epoch)
    _id = field_validator("conversation_id", mode="before")(scalar_id)

    @property
    def user_turns(self) -> list[Turn]:
        return [t for t in self.turns if t.role == "user"]

    def judged_span(self) -> tuple[str | None, str | None]:
        """(span, response id) of the last assistant turn that has either: what a verdict is attached to."""
        for t in reversed(self.turns):
            if t.role == "assistant" and (t.span or t.response_id):
                return t.span, t.response_id
        return None, None


Event = TurnEvent | EndEvent | Conversation | RejectedTurn
_MODELS: dict[str, type[Record]] = {"turn": TurnEvent, "end": EndEvent, "conversation": Conversation,
                                    "rejected": RejectedTurn}
# each model's field names, read once: pydantic's ``model_fields`` is a descriptor call per access (per event)
_FIELDS: dict[type[Record], frozenset[str]] = {m: frozenset(m.model_fields) for m in _MODELS.values()}
_TURN_FIELDS = frozenset(Turn.model_fields)


def event_kind(obj: dict[str, Any]) -> str:
    """``turn``, ``end`` or ``conversation`` for a decoded input object (``type`` may be omitted)."""
    kind = obj.get("type")
    if kind is None:  # producers may omit `type`: infer it from the shape
        kind = "conversation" if "turns" in obj else "turn"
    if not isinstance(kind, str) or kind not in _MODELS:
        raise InvalidEvent("invalid_schema", f"field 'type': expected turn, end or conversation, got {kind!r}",
                           field="type")
    return kind


@dataclass(frozen=True)
class DecodedEvent:
    """One decoded input record and what the decoder left out or filled in."""

    event: Event
    unknown_fields: tuple[str, ...] = ()  # names only (never values): ignored, counted by the caller
    filled_timestamp: bool = False  # the event had no ``timestamp``: the broker record's time stands in


def _drop_unknown(obj: dict[str, Any], model: type[Record]) -> list[str]:
    """Remove the keys ``model`` does not know from ``obj`` (and from a conversation's turns); return their
    names. A producer's extra field (``user_id``, ``content``) must not cost the event; its value is never
    kept, so it cannot reach metadata, a topic or a log."""
    known = _FIELDS[model]
    unknown = [k for k in obj if k not in known]
    if not unknown and model is not Conversation:
        return unknown  # every event of a well-behaved producer: nothing to remove or dedupe
    for k in unknown:
        del obj[k]
    if model is Conversation and isinstance(obj.get("turns"), list):
        for turn in obj["turns"]:
            if isinstance(turn, dict):
                extra = [k for k in turn if k not in _TURN_FIELDS]
                for k in extra:
                    del turn[k]
                unknown.extend(f"turns.{k}" for k in extra)
    return list(dict.fromkeys(unknown))


def failing_field(exc: ValidationError) -> str | None:
    """The first failing field's top-level name: a model field (bounded), never user data."""
    for err in exc.errors():
        if err["loc"]:
            return str(err["loc"][0])
    return None


def describe_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"field '{loc}': {err['msg']}")
    more = exc.error_count() - 5
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def decode_input(raw: bytes, *, max_bytes: int = 1_000_000, timestamp: float | None = None) -> DecodedEvent:
    """Decode and validate one input record; raise :class:`InvalidEvent` on anything wrong.

    ``timestamp`` (epoch seconds) stands in for a turn or end event's missing ``timestamp``: the broker
    record's time; without one, the current time.
    """
    if raw is None or len(raw) == 0:
        raise InvalidEvent("empty", "the message has no value")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if len(raw) > max_bytes:
            raise InvalidEvent("too_large", f"{len(raw)} bytes exceeds max_event_bytes={max_bytes}") from None
        raise InvalidEvent("malformed_json", str(exc)) from exc
    if len(raw) > max_bytes:  # parsed only to tell whose turn it was: nothing of it is kept
        raise InvalidEvent("too_large", f"{len(raw)} bytes exceeds max_event_bytes={max_bytes}",
                           **whose_turn(obj))
    if not isinstance(obj, dict):
        raise InvalidEvent("invalid_schema", f"expected a JSON object, got {type(obj).__name__}")
    cid = scalar_id(obj.get("conversation_id"))
    cid = cid if isinstance(cid, str) else None
    try:
        model = _MODELS[event_kind(obj)]
    except InvalidEvent as exc:
        exc.conversation_id = cid
        raise
    unknown = _drop_unknown(obj, model)
    filled = model is not Conversation and obj.get("timestamp") is None
    if filled:
        obj["timestamp"] = time.time() if timestamp is None else timestamp
    try:
        event: Event = model.model_validate(obj)  # type: ignore[assignment]
    except ValidationError as exc:
        chat = {"messages", "content", "tool_calls"} & set(unknown)
        hint = (f" (an OpenAI chat message? its '{sorted(chat)[0]}' is read with CONVMON_INPUT_FORMAT=openai or "
                "`convmon replay --format openai`)") if chat else ""
        raise InvalidEvent("invalid_schema", describe_error(exc) + hint, field=failing_field(exc),
                           **whose_turn(obj)) from exc
    return DecodedEvent(event, tuple(unknown), filled)


def whose_turn(obj: Any) -> dict[str, Any]:
    """InvalidEvent's ``conversation_id``, ``turn`` and ``turn_index`` for a rejected object, as far as they can be
    read: a rejected turn leaves its conversation incomplete."""
    if not isinstance(obj, dict):
        return {}
    cid = scalar_id(obj.get("conversation_id"))
    kind = obj.get("type", "conversation" if "turns" in obj or "messages" in obj else "turn")
    index = obj.get("turn_index")
    return {"conversation_id": cid if isinstance(cid, str) and 0 < len(cid) <= 256 else None,
            "turn": kind == "turn",
            "turn_index": index if type(index) is int and index >= 0 else None}


def decode_event(raw: bytes, *, max_bytes: int = 1_000_000, timestamp: float | None = None) -> Event:
    """:func:`decode_input`'s event alone (unknown fields ignored, uncounted)."""
    return decode_input(raw, max_bytes=max_bytes, timestamp=timestamp).event


def encode(record: BaseModel) -> bytes:
    return orjson.dumps(record.model_dump(mode="json", exclude_none=True))
