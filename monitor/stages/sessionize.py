"""Turn events → finished conversations, as pure functions over a JSON-able state.

The faust agent keeps one state dict per conversation in a table (so it survives restarts via
the changelog) and calls these functions. A conversation finishes on its ``end`` event or after
``idle_timeout_s`` without events (processing time, so replays of old logs do not expire at
once). A finished conversation leaves a tombstone for ``closed_retention_s`` so that duplicate or
late events are recognised and dead-lettered rather than starting a second conversation: each
conversation is emitted exactly once.

Memory is bounded by ``max_turns`` / ``max_chars``: past them the middle of the conversation is
dropped (the opening and the latest turns carry the most signal) and it is marked truncated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from monitor.contracts.events import Conversation, EndEvent, Feedback, Turn, TurnEvent

State = dict[str, Any]
Outcome = Literal["ok", "replaced", "truncated", "late", "unknown_conversation"]
TRUNCATION_MARK = " [...truncated]"


@dataclass(frozen=True)
class Limits:
    max_turns: int = 200
    max_chars: int = 100_000

    @property
    def max_turn_chars(self) -> int:
        return max(self.max_chars // 4, 50)


def is_closed(state: State | None) -> bool:
    return state is not None and state.get("closed_at") is not None


def is_idle(state: State, now: float, idle_timeout_s: float) -> bool:
    return not is_closed(state) and bool(state.get("turns")) and now - state.get("last_seen", now) > idle_timeout_s


def _merge(state: State, metadata: dict[str, str], feedback: Feedback | None) -> None:
    state["metadata"].update(metadata)
    if feedback is not None:
        state["feedback"].update(feedback.model_dump(exclude_none=True))


def _enforce_limits(state: State, limits: Limits) -> bool:
    """Drop turns from the middle until within limits; return True if anything was dropped."""
    turns: dict[str, dict[str, Any]] = state["turns"]
    dropped = False
    while len(turns) > 2 and (
        len(turns) > limits.max_turns or sum(len(t["text"]) for t in turns.values()) > limits.max_chars
    ):
        order = sorted(turns, key=int)
        del turns[order[len(order) // 2]]
        dropped = True
    if dropped:
        state["truncated"] = True
    return dropped


def apply_turn(state: State | None, event: TurnEvent, limits: Limits, now: float) -> tuple[State, Outcome]:
    """Add one turn. A repeated turn_index replaces the earlier text (producer retries)."""
    if is_closed(state):
        assert state is not None
        return state, "late"
    if state is None:
        state = {"turns": {}, "metadata": {}, "feedback": {}, "truncated": False, "first_ts": event.timestamp}
    text = event.text
    outcome: Outcome = "ok"
    if len(text) > limits.max_turn_chars:
        text = text[: limits.max_turn_chars] + TRUNCATION_MARK
        state["truncated"] = True
        outcome = "truncated"
    key = str(event.turn_index)
    if key in state["turns"] and outcome == "ok":
        outcome = "replaced"
    state["turns"][key] = {"role": event.role, "text": text, "ts": event.timestamp}
    state["first_ts"] = min(state["first_ts"], event.timestamp)
    state["last_ts"] = max(state.get("last_ts", event.timestamp), event.timestamp)
    state["last_seen"] = now
    _merge(state, event.metadata, event.feedback)
    if _enforce_limits(state, limits):
        outcome = "truncated"
    return state, outcome


def finish(conversation_id: str, state: State, end_reason: Literal["end", "idle"], now: float) -> Conversation:
    turns = [
        Turn(index=int(k), role=v["role"], text=v["text"], timestamp=v["ts"])
        for k, v in sorted(state["turns"].items(), key=lambda kv: int(kv[0]))
    ]
    return Conversation(
        conversation_id=conversation_id,
        turns=turns,
        feedback=Feedback(**state["feedback"]) if state["feedback"] else None,
        metadata=state["metadata"],
        started_at=state.get("first_ts"),
        ended_at=state.get("end_ts", state.get("last_ts")),
        end_reason=end_reason,
        truncated=state["truncated"],
        simulated_truth=state.get("simulated_truth"),
    )


def close(now: float) -> State:
    """The tombstone left behind by a finished conversation."""
    return {"closed_at": now}


def apply_end(state: State | None, event: EndEvent, now: float) -> tuple[State | None, Conversation | None, Outcome]:
    """Finish a conversation on its end event; late/duplicate or unknown ends emit nothing."""
    if is_closed(state):
        return state, None, "late"
    if state is None or not state["turns"]:
        return state, None, "unknown_conversation"
    _merge(state, event.metadata, event.feedback)
    state["end_ts"] = event.timestamp
    if event.simulated_truth is not None:
        state["simulated_truth"] = event.simulated_truth
    conversation = finish(event.conversation_id, state, "end", now)
    return close(now), conversation, "ok"


def sweep(
    items: list[tuple[str, State]], now: float, *, idle_timeout_s: float, closed_retention_s: float
) -> tuple[list[Conversation], list[str], list[str]]:
    """Find idle conversations to finish and tombstones to forget.

    Returns (finished conversations, ids to tombstone, ids to delete).
    """
    finished: list[Conversation] = []
    to_close: list[str] = []
    to_delete: list[str] = []
    for conversation_id, state in items:
        if is_closed(state):
            if now - state["closed_at"] > closed_retention_s:
                to_delete.append(conversation_id)
        elif is_idle(state, now, idle_timeout_s):
            finished.append(finish(conversation_id, state, "idle", now))
            to_close.append(conversation_id)
    return finished, to_close, to_delete
