"""What a featurizer sees: each user turn, with the assistant turns it answers as context.

SPUR's rubric items describe the *user's* behaviour (gratitude, rephrasing, complaints), so the
user's words are the signal and the assistant's words are only context: "sorry, I can't" from
the assistant must not look like a complaint by the user. Every featurizer therefore receives a
conversation as a list of :class:`TurnPair` — one per user turn, with the assistant text since the
previous user turn — and keeps the two sides in separate feature blocks (the context block
down-weighted), rather than embedding one undifferentiated transcript.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation


@dataclass(frozen=True)
class TurnPair:
    """One user turn and the assistant text it reacts to (empty before the first answer)."""

    user: str
    context: str


def user_turns_in_context(conversation: Conversation) -> list[TurnPair]:
    """Pair every user turn with the assistant turns since the previous user turn.

    >>> from monitor.contracts.events import Turn
    >>> c = Conversation(conversation_id="c", turns=[Turn(index=0, role="user", text="hi"),
    ...     Turn(index=1, role="assistant", text="hello"), Turn(index=2, role="user", text="thanks")])
    >>> [(p.user, p.context) for p in user_turns_in_context(c)]
    [('hi', ''), ('thanks', 'hello')]
    """
    pairs: list[TurnPair] = []
    context: list[str] = []
    for turn in conversation.turns:
        if turn.role == "assistant":
            context.append(turn.text)
        elif turn.role == "user":
            pairs.append(TurnPair(user=turn.text, context="\n".join(context)))
            context = []
    if not pairs:  # an assistant-only conversation still gets a row of features (all context)
        pairs.append(TurnPair(user="", context="\n".join(context)))
    return pairs


def check_conversations(X: Sequence[Conversation], owner: str) -> list[Conversation]:
    """Validate transform() input: a sequence of Conversation objects."""
    if isinstance(X, (str, bytes)) or not isinstance(X, Sequence):
        raise ConfigError(f"{owner}.transform expects a list of Conversation objects. Got {type(X).__name__}.")
    for item in X:
        if not isinstance(item, Conversation):
            raise ConfigError(
                f"{owner}.transform expects a list of Conversation objects. Got an element of type "
                f"{type(item).__name__}."
            )
    return list(X)
