"""One GenAI call (:class:`~monitor.stages.genai.Call`) -> its turn events, history parsed once per message.

Every call repeats its conversation's history; within one message (one OTLP request) a later call's
``gen_ai.input.messages`` usually extends the earlier one's, so only the appended tail is parsed
(:data:`Known` carries what was parsed). :func:`call_events` takes one of two paths that give the same
events (tests/stages/test_otlp_input.py checks): :func:`chat_turns`, the one nearly every call takes
(input and output messages as JSON strings) in one function, and :func:`general_events` for the rest
(flattened attributes, span events, values that are not what the conventions say).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

import msgspec

from monitor.contracts.events import EndEvent, TurnEvent
from monitor.contracts.trusted import new, set_dict, set_extra, set_fields, set_private
from monitor.stages.genai import (
    _TURN_FIELDS,
    COMPLETION,
    INPUT,
    OUTPUT,
    PROMPT,
    RESPONSE_ID,
    ByResource,
    Call,
    GenAiMapping,
    NoContent,
    call_dimensions,
    call_feedback,
    flag,
    flattened,
    message_text,
    messages,
    new_turn,
    span_ref,
)


class _Part(msgspec.Struct, gc=False):
    type: Any = "text"  # the defaults are message_text's: a part without a type is text, without content empty
    content: Any = ""


class _Message(msgspec.Struct, gc=False):
    role: Any = msgspec.UNSET  # a history message without a role is no turn, an answer without one is the assistant's
    parts: list[_Part] | None = None
    content: Any = None  # the older form: a string, or OpenAI-style parts


# chat_turns' messages: msgspec builds these structs (and skips every other field) in half the time orjson
# built the dicts; an array that does not fit them (not JSON, items that are not objects, odd parts) is left
# to the general path, which reads any JSON
_messages = msgspec.json.Decoder(list[_Message]).decode


def _text(message: _Message) -> str:
    """:func:`~monitor.stages.genai.message_text` for a :class:`_Message`."""
    parts = message.parts
    if parts is not None:
        if len(parts) == 1 and type(text := (one := parts[0]).content) is str and one.type == "text":
            return text.strip()
        return "\n".join(t for t in [str(p.content) for p in parts if p.type == "text"] if t).strip()
    content = message.content
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):  # OpenAI-style content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict)).strip()
    return ""


Known = dict[str, tuple[str, int]]  # conversation -> its last input JSON array in this message, the turns in it


def _tail(value: str, known: tuple[str, int] | None) -> tuple[str, int] | None:
    """A later call repeats the history of an earlier one and appends to it: when ``value`` extends the
    conversation's previous input JSON, the JSON array of only the appended messages and the turn index
    they start at, so a conversation's history is parsed once per message, not once per call."""
    if known is None:
        return None
    previous, turns = known
    head = previous[:-1]  # previous parsed as a JSON array and was stored right-stripped: it ends with "]"
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
        return (messages(sent, INPUT) if sent is not None else [],
                messages(a[OUTPUT], OUTPUT) if OUTPUT in a else [], first)
    history: list[Any] = flattened(a, PROMPT)
    answer: list[Any] = flattened(a, COMPLETION)
    for name, event in call.events:  # gen_ai.content.prompt / gen_ai.content.completion span events
        if PROMPT in event:
            history = messages(event[PROMPT], f"span event {name} {PROMPT}")
        if COMPLETION in event:
            answer = messages(event[COMPLETION], f"span event {name} {COMPLETION}")
    if not history and not answer:
        raise NoContent
    return history, answer, 0


def chat_turns(call: Call, cid: str, sent: str, got: str, m: GenAiMapping, seen: Container[int],
               known: Known | None, out: dict[int, TurnEvent], ends: list[EndEvent],
               by_resource: ByResource | None = None) -> bool:
    """:func:`call_events` for the usual call, its input and output messages (``sent``, ``got``) JSON
    strings, in one function that puts the turns in ``out`` by index (an answer replaces a turn taken from
    a later call's history: it has the span) and an end event in ``ends``: this runs for every call, and
    the helpers' calls, checks and lists were a third of its cost. False, having done nothing, when the
    messages are not JSON arrays: the general path says what is wrong. ``by_resource``: see
    :func:`~monitor.stages.genai.call_dimensions`. Raises :class:`NoContent`."""
    index, body = 0, sent
    if known is not None and (tail := _tail(sent, known.get(cid))) is not None:
        body, index = tail
    try:
        history, answer = _messages(body), _messages(got)
    except msgspec.DecodeError:  # also when they are JSON, but not arrays of message objects
        return False
    metadata = call_dimensions(call, m, by_resource)
    start = call.start
    last: TurnEvent | None = None  # the last turn this call gives (it carries the call's feedback)
    for message in history:
        if (role := message.role) == "user" or role == "assistant":
            if (parts := message.parts) is not None and len(parts) == 1 and type(
                    text := (one := parts[0]).content) is str and one.type == "text":
                text = text.strip()  # the usual single text part: _text's first case, inline
            else:
                text = _text(message)
            if text:
                if index not in seen:  # new_turn() inline (the general path calls it: a test compares them)
                    out[index] = last = new(TurnEvent)
                    set_dict(last, {"type": "turn", "conversation_id": cid, "turn_index": index, "role": role,
                                    "text": text, "timestamp": start, "feedback": None, "metadata": metadata,
                                    "span": None, "response_id": None})
                    set_fields(last, _TURN_FIELDS)
                    set_extra(last, None)
                    set_private(last, None)
                index += 1
    if known is not None:
        if sent[-1:] != "]":
            sent = sent.rstrip()
        if sent[-1:] == "]":
            known[cid] = (sent, index)
    for message in answer:  # several choices (n > 1): the first is the one the user saw
        if ((role := message.role) is msgspec.UNSET or role == "assistant") and (text := _text(message)):
            response = call.attributes.get(RESPONSE_ID)
            last = new_turn(cid, index, "assistant", text, call.end, metadata, span_ref(call.trace_id, call.span_id),
                            str(response)[:128] if response else None)
            if (kept := out.get(index)) is None or (last.span and not kept.span):
                out[index] = last
            index += 1
            break
    if index == 0:
        raise NoContent
    if not m.plain:
        _feedback_and_end(call, cid, m, index, last, out, ends)
    return True


def _feedback_and_end(call: Call, cid: str, m: GenAiMapping, turns: int, last: TurnEvent | None,
                      out: dict[int, TurnEvent], ends: list[EndEvent]) -> None:
    """The call's feedback onto the last turn it gave (where that turn was kept), its end event."""
    if (feedback := call_feedback(call, m)) and last is not None and out.get(last.turn_index) is last:
        out[last.turn_index] = last.model_copy(update={"feedback": feedback})
    if m.end_attribute is not None and flag(call.attributes.get(m.end_attribute)) is True:
        ends.append(EndEvent(type="end", conversation_id=cid, timestamp=call.end, turn_count=turns))


def call_events(call: Call, cid: str, m: GenAiMapping, seen: Container[int] | None = None,
                known: Known | None = None
                ) -> list[TurnEvent | EndEvent]:
    """The turns of one call (history at its positions, the first answer after them) and, when the
    configured end attribute says so, an end event counting them. History turns whose index is in
    ``seen`` (already taken from this message) are not built again; ``known`` (per message) lets a call
    parse only the history its conversation's previous call did not send. Raises :class:`NoContent`."""
    attrs = call.attributes
    turns: dict[int, TurnEvent] = {}
    ends: list[EndEvent] = []
    if type(sent := attrs.get(INPUT)) is str and type(got := attrs.get(OUTPUT)) is str and chat_turns(
            call, cid, sent, got, m, () if seen is None else seen, known, turns, ends):
        return [*turns.values(), *ends]
    return general_events(call, cid, m, seen, known)


def general_events(call: Call, cid: str, m: GenAiMapping, seen: Container[int] | None = None,
                   known: Known | None = None) -> list[TurnEvent | EndEvent]:
    """:func:`call_events` for any call, whichever convention it follows, step by step."""
    attrs = call.attributes
    ended = m.end_attribute is not None and flag(attrs.get(m.end_attribute)) is True
    feedback = call_feedback(call, m) if m.thumbs_attribute or m.csat_attribute else None
    try:
        history, answer, index = history_and_answer(call, known.get(cid) if known is not None else None)
    except NoContent:
        if ended or feedback:  # a content-less span can still end the conversation or carry its feedback
            return [EndEvent(type="end", conversation_id=cid, timestamp=call.end, feedback=feedback)]
        raise
    metadata = call_dimensions(call, m)
    out: list[TurnEvent | EndEvent] = []
    start = call.start
    for message in history:
        if type(message) is dict and ((role := message.get("role")) == "user" or role == "assistant") \
                and (text := message_text(message)):
            if seen is None or index not in seen:
                out.append(new_turn(cid, index, role, text, start, metadata))
            index += 1
    if known is not None and type(sent := attrs.get(INPUT)) is str and (sent := sent.rstrip()).endswith("]"):
        known[cid] = (sent, index)
    for message in answer:  # several choices (n > 1): the first is the one the user saw
        if type(message) is dict and message.get("role", "assistant") == "assistant" and (
                text := message_text(message)):
            response = attrs.get(RESPONSE_ID)
            out.append(new_turn(cid, index, "assistant", text, call.end, metadata,
                                span_ref(call.trace_id, call.span_id), str(response)[:128] if response else None))
            index += 1
            break
    if index == 0:
        raise NoContent
    if feedback and out:
        out[-1] = out[-1].model_copy(update={"feedback": feedback})
    if ended:
        out.append(EndEvent(type="end", conversation_id=cid, timestamp=call.end, turn_count=index))
    return out
