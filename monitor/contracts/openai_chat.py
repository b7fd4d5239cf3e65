"""OpenAI Chat Completions logs as input (``CONVMON_INPUT_FORMAT=openai``, ``convmon replay --format openai``).

Two shapes, one JSON object per message:

* a conversation: ``{"id", "messages": [...], "metadata", "feedback", "created"}`` with ``messages`` as the Chat
  Completions API takes and returns them;
* one message of a conversation, a turn event whose text is a Chat Completions message:
  ``{"conversation_id", "turn_index", "role", "content", "tool_calls", "timestamp", "metadata"}``.

A turn is what the user saw: a user or assistant message with text. ``content`` may be a string or a list of
content parts (text parts joined by newlines; an image, audio or file part stands as ``[image_url]``,
``[input_audio]``, ``[file]``); an assistant's ``refusal`` is its text. System, developer and tool messages, and
an assistant message that only calls tools, are accepted and are not turns (the OTLP input does the same):
the caller counts them by role. Ids of any JSON scalar type are read as strings; an object without ``id`` or
``conversation_id`` is named by a hash of its messages, so a redelivered copy is the same conversation.
Objects without ``messages``, ``content`` or ``tool_calls`` (``end`` events, convmon's own events) are not
this module's: :func:`is_chat` tells them apart.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import Conversation, Event, TurnEvent, describe_error, failing_field, scalar_id

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
TURN_ROLES = ("user", "assistant")
# What a message may carry besides its turn (Chat Completions fields): read where useful, never reported.
MESSAGE_FIELDS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio",
                            "function_call", "annotations", "timestamp", "created"})
CONVERSATION_FIELDS = frozenset({"type", "id", "conversation_id", "messages", "metadata", "feedback", "model",
                                 "created", "timestamp", "started_at", "ended_at"})
MESSAGE_EVENT_FIELDS = MESSAGE_FIELDS | {"type", "id", "conversation_id", "turn_index", "metadata", "feedback",
                                         "model", "span", "response_id"}
_PART_TYPE = re.compile(r"^[a-z_]{1,32}$")


@dataclass(frozen=True)
class ChatDecoded:
    events: list[Event]
    skipped: tuple[str, ...] = ()  # roles of the messages that are not turns: accepted, counted by the caller
    unknown_fields: tuple[str, ...] = ()  # names only: ignored, counted by the caller


def is_chat(obj: dict[str, Any]) -> bool:
    """The object is a Chat Completions conversation or message (else: a convmon event)."""
    if "messages" in obj:
        return True
    return obj.get("type", "turn") == "turn" and "text" not in obj and any(
        k in obj for k in ("content", "tool_calls", "refusal"))


def message_text(message: dict[str, Any], field: str = "content", cid: str | None = None) -> str:
    """The text the message showed, from string or content-part ``content`` (or an assistant's ``refusal``);
    ``field``: where ``content`` is, for the error."""
    content = message.get("content")
    texts: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for n, part in enumerate(content):
            if not isinstance(part, dict):
                raise _invalid(f"field '{field}.{n}': expected a content part object", field, cid)
            kind = part.get("type", "text")
            if kind in ("text", "refusal") and isinstance(part.get(kind), str):
                texts.append(part[kind])
            else:
                texts.append(f"[{kind if isinstance(kind, str) and _PART_TYPE.match(kind) else 'part'}]")
    elif content is not None:
        raise _invalid(f"field '{field}': expected a string, a list of content parts or null", field, cid)
    text = "\n".join(t for t in texts if t.strip()).strip()
    if not text and isinstance(message.get("refusal"), str):
        text = message["refusal"].strip()
    return text


def _invalid(detail: str, field: str, cid: str | None = None) -> InvalidEvent:
    return InvalidEvent("invalid_schema", detail, field=field.split(".")[0], conversation_id=cid)


def _role(message: dict[str, Any], field: str, cid: str | None) -> str:
    role = message.get("role")
    if role not in ROLES:
        raise _invalid(f"field '{field}': expected one of {', '.join(ROLES)}, got {role!r}", field, cid)
    return str(role)


def _time(message: dict[str, Any]) -> Any:
    return message.get("timestamp", message.get("created"))


def _metadata(obj: dict[str, Any], cid: str | None) -> dict[str, Any]:
    """``metadata`` with scalar values as strings (Chat Completions' own are strings), and ``model`` as
    ``model_version`` unless the metadata names one."""
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise _invalid("field 'metadata': expected an object of string to string", "metadata", cid)
    out = {k: scalar_id(v) for k, v in metadata.items()}
    if isinstance(obj.get("model"), str) and "model_version" not in out:
        out["model_version"] = obj["model"]
    return out


def _cid(obj: dict[str, Any]) -> str | None:
    value = scalar_id(obj.get("conversation_id", obj.get("id")))
    return value if isinstance(value, str) else None


def _validated(model: type[TurnEvent] | type[Conversation], data: dict[str, Any], cid: str | None) -> Event:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidEvent("invalid_schema", describe_error(exc), field=failing_field(exc), conversation_id=cid) \
            from exc


def decode_chat(obj: dict[str, Any], *, timestamp: float) -> ChatDecoded:
    """The convmon events of one Chat Completions object; :class:`InvalidEvent` names the failing field.
    ``timestamp``: the broker record's time, for a message event without its own."""
    if "messages" in obj:
        return _conversation(obj)
    try:
        return _message(obj, timestamp)
    except InvalidEvent as exc:  # a rejected message leaves its conversation incomplete
        index = obj.get("turn_index")
        exc.turn, exc.turn_index = True, index if type(index) is int and index >= 0 else None
        raise


def _conversation(obj: dict[str, Any]) -> ChatDecoded:
    messages = obj["messages"]
    if not isinstance(messages, list) or not messages:
        raise _invalid("field 'messages': expected a non-empty list of messages", "messages", _cid(obj))
    cid = _cid(obj)
    if cid is None and obj.get("conversation_id", obj.get("id")) is None:
        cid = "sha-" + hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
    turns: list[dict[str, Any]] = []
    skipped: list[str] = []
    unknown = {k for k in obj if k not in CONVERSATION_FIELDS}
    for n, message in enumerate(messages):
        where = f"messages.{n}"
        if not isinstance(message, dict):
            raise _invalid(f"field '{where}': expected a message object", where, cid)
        role = _role(message, f"{where}.role", cid)
        unknown.update(f"messages.{k}" for k in message if k not in MESSAGE_FIELDS)
        text = message_text(message, f"{where}.content", cid) if role in TURN_ROLES else ""
        if not text:
            skipped.append(role)
            continue
        turn: dict[str, Any] = {"index": len(turns), "role": role, "text": text}
        if _time(message) is not None:
            turn["timestamp"] = _time(message)
        turns.append(turn)
    if not turns:
        raise _invalid("field 'messages': no user or assistant message with text", "messages", cid)
    data: dict[str, Any] = {"conversation_id": obj.get("conversation_id", obj.get("id", cid)), "turns": turns,
                            "metadata": _metadata(obj, cid)}
    for key in ("feedback", "started_at"):
        if obj.get(key) is not None:
            data[key] = obj[key]
    ended = obj.get("ended_at", _time(obj))
    if ended is not None:
        data["ended_at"] = ended
    return ChatDecoded([_validated(Conversation, data, cid)], tuple(skipped), tuple(sorted(unknown)))


def _message(obj: dict[str, Any], timestamp: float) -> ChatDecoded:
    cid = _cid(obj)
    role = _role(obj, "role", cid)
    unknown = tuple(sorted(k for k in obj if k not in MESSAGE_EVENT_FIELDS))
    text = message_text(obj, "content", cid) if role in TURN_ROLES else ""
    if not text:
        return ChatDecoded([], (role,), unknown)
    data: dict[str, Any] = {"conversation_id": obj.get("conversation_id", obj.get("id")), "role": role, "text": text,
                            "metadata": _metadata(obj, cid),
                            "timestamp": _time(obj) if _time(obj) is not None else timestamp}
    for key in ("turn_index", "feedback", "span", "response_id"):
        if obj.get(key) is not None:
            data[key] = obj[key]
    return ChatDecoded([_validated(TurnEvent, data, cid)], (), unknown)
