"""The per-conversation caps, and the same caps on a conversation that arrives whole.

The sessionizer applies :class:`Limits` turn by turn (stages/sessionize.py); a producer that
publishes a finished conversation (``type: conversation``) skips the sessionizer, so
:func:`bound_conversation` applies the same policy to it: *truncate and flag*. A turn longer than
``max_turn_chars`` is cut (with a mark), turns past ``max_turns``, ``max_chars`` or ``max_bytes`` are
dropped, metadata keys that do not fit ``max_metadata_bytes`` are dropped, and the conversation is
emitted with ``truncated=True``. Each cut is named by the cap that made it (``REASONS``): the metrics
count conversations per reason and turns per reason.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass

import orjson

from monitor.contracts.events import Conversation, Turn

TRUNCATION_MARK = " [...truncated]"
TURN_OVERHEAD = 64  # JSON bytes of a turn besides its text (index, role, timestamp, punctuation)
REASONS = ("max_turns", "max_chars", "max_bytes", "max_turn_chars", "max_metadata_bytes")


@dataclass(frozen=True)
class Limits:
    max_turns: int = 200
    max_chars: int = 100_000
    max_bytes: int = 262_144
    max_metadata_bytes: int = 8192
    max_open: int = 50_000  # open conversations per partition (max_open_conversations)

    @functools.cached_property  # read per turn
    def max_turn_chars(self) -> int:
        return max(self.max_chars // 4, 50)


def json_bytes(obj: object) -> int:
    return len(orjson.dumps(obj))


def turn_size(text: str, span: str | None, response_id: str | None) -> tuple[int, int]:
    """(chars, JSON bytes) a stored turn counts against the session's caps."""
    return len(text), json_bytes(text) + TURN_OVERHEAD + len(span or "") + len(response_id or "")


def over_cap(limits: Limits, turns: int, chars: int, nbytes: int) -> str | None:
    """The cap a conversation of this size would pass (``turns`` already held before the new one), or None."""
    if turns >= limits.max_turns:
        return "max_turns"
    if chars > limits.max_chars:
        return "max_chars"
    return "max_bytes" if nbytes > limits.max_bytes else None


def bound_conversation(conversation: Conversation, limits: Limits) -> tuple[Conversation, Counter[str]]:
    """``conversation`` within ``limits`` (flagged ``truncated`` when cut), and what was cut, by reason:
    turns dropped or cut per cap, and 1 under ``max_metadata_bytes`` when metadata keys were dropped."""
    cut: Counter[str] = Counter()
    turns: list[Turn] = []
    chars = nbytes = 0
    for turn in conversation.turns:
        text = turn.text
        if len(text) > limits.max_turn_chars:
            text = text[: limits.max_turn_chars] + TRUNCATION_MARK
        size = turn_size(text, turn.span, turn.response_id)
        reason = over_cap(limits, len(turns), chars + size[0], nbytes + size[1])
        if reason is not None:
            cut[reason] += 1
            continue
        if text is not turn.text:
            cut["max_turn_chars"] += 1
            turn = turn.model_copy(update={"text": text})
        turns.append(turn)
        chars, nbytes = chars + size[0], nbytes + size[1]
    metadata: dict[str, str] = {}
    meta_bytes = 2
    for key, value in conversation.metadata.items():
        grown = meta_bytes + json_bytes({key: value}) - 1
        if grown > limits.max_metadata_bytes:
            cut["max_metadata_bytes"] = 1
            continue
        metadata[key], meta_bytes = value, grown
    if not cut:
        return conversation, cut
    if not turns:  # every turn was over a cap alone: keep the first, cut to fit (6 JSON bytes a char at worst)
        first = conversation.turns[0]
        keep = min(limits.max_turn_chars, (limits.max_bytes - TURN_OVERHEAD) // 6)
        turns = [first.model_copy(update={"text": first.text[:keep] + TRUNCATION_MARK})]
    return conversation.model_copy(update={"turns": turns, "metadata": metadata, "truncated": True}), cut
