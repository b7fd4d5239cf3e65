"""Conversations with a rejected turn: never scored as if whole.

When a turn event fails validation it is dead-lettered on its own; the conversation it belonged to would
otherwise be scored from the turns that remain (a lone assistant turn scored as a satisfied user). So the
hot path marks the conversation (monitor/stages/sessionize.py, ``reject``) and, when it closes, this stage
applies ``incomplete_conversations``: ``dead_letter`` (the default) sends it whole to the dead-letter topic as
``conversation_incomplete``, its detail naming the rejected turn and field; ``score`` lets it be scored with
its ``incomplete`` mark, which its score records and OTLP evaluation events carry. Either way it is counted in
``convmon_conversations_incomplete_total{action}``.

A rejected turn read by a worker that is not the conversation's writer (an unkeyed event, or an input topic
whose partitions are not convmon's) becomes a :class:`~monitor.contracts.events.RejectedTurn` marker for the
re-keyed topic, under the conversation's id, so the writer marks it.
"""

from __future__ import annotations

from typing import Literal

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import Conversation, RejectedTurn, Rejection, encode
from monitor.contracts.metrics import Metrics
from monitor.stages.deadletter import DeadLetter, dead_letter

Policy = Literal["dead_letter", "score"]
REASON = "conversation_incomplete"


def rejection_of(exc: InvalidEvent) -> Rejection | None:
    """What a rejected record leaves its conversation missing: None unless it was a turn of a readable id."""
    if not exc.turn or exc.conversation_id is None:
        return None
    field = exc.field if exc.field is None or len(exc.field) <= 64 else exc.field[:64]
    return Rejection(turn_index=exc.turn_index, field=field, reason=exc.reason[:64])


def marker(exc: InvalidEvent, rejection: Rejection, timestamp: float) -> RejectedTurn:
    """The re-keyed topic's record telling the conversation's writer about ``rejection``."""
    assert exc.conversation_id is not None
    return RejectedTurn(type="rejected", conversation_id=exc.conversation_id, rejection=rejection,
                        timestamp=timestamp)


class IncompleteConversations:
    def __init__(self, metrics: Metrics, *, policy: Policy, max_request_bytes: int) -> None:
        self.metrics = metrics
        self.policy = policy
        self.max_request_bytes = max_request_bytes
        for action in ("dead_lettered", "scored"):
            metrics.conversations_incomplete.labels(action)

    def settle(self, closed: list[tuple[Conversation, int]], dead: list[DeadLetter]) -> list[tuple[Conversation, int]]:
        """``closed`` without the incomplete conversations the policy dead-letters (appended to ``dead``)."""
        if all(c.incomplete is None for c, _ in closed):
            return closed
        kept = []
        for conversation, partition in closed:
            rejection = conversation.incomplete
            if rejection is None:
                kept.append((conversation, partition))
            elif self.policy == "score":
                self.metrics.conversations_incomplete.labels("scored").inc()
                kept.append((conversation, partition))
            else:
                self.metrics.conversations_incomplete.labels("dead_lettered").inc()
                cid = conversation.conversation_id
                dead.append(dead_letter(
                    encode(conversation), cid.encode(), reason=REASON, stage="sessionize",
                    detail=f"{rejection.describe()}: the conversation is not scored as if whole "
                           "(CONVMON_INCOMPLETE_CONVERSATIONS=score scores it, marked incomplete)",
                    max_bytes=self.max_request_bytes, field=rejection.field, conversation_id=cid))
        return kept
