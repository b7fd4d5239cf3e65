"""Conversation-cue featurizer: twelve interpretable counts of how the user talks and the assistant answers.

A whole-conversation judgement ("was the user satisfied overall?") rests on a few cues spread over the
dialogue, which hashed n-grams dilute among thousands of columns: how long the user keeps going, how many
questions they ask, whether they thank or praise, how often they say no, and how often the assistant
apologises or says it cannot help. The first three user turns (with the answers they get) are counted
apart, because an early failure colours the whole conversation. Beside ``hashing`` (``hashing+lexicon``) it
gives the linear model these cues as a handful of dense columns; docs/benchmarks.md measures it.

Each column is ``log1p(count) / 3`` times ``weight`` (about 1 for 20 occurrences, the scale of the
L2-normalised hashing blocks). The default weight, 3, lets these few columns carry more of a jointly
regularised linear model than weight 1 does; it was chosen by cross-validation on MWOZ and SGD training
dialogues (``bench use``'s OVERALL protocol). Stateless: the lexicon is code, so an artifact records only
``weight``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from distill.featurizers.base import check_conversations, user_turns_in_context
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation

EARLY_TURNS = 3  # user turns counted apart as the conversation's opening

_WORD = r"(?:{})\b"
THANKS = re.compile(r"\b" + _WORD.format(r"thanks?|thank you|thx|ty|appreciated?|grateful|cheers"), re.I)
PRAISE = re.compile(r"\b" + _WORD.format(
    r"great|perfect|awesome|excellent|wonderful|fantastic|amazing|helpful|nice|good|cool|love|glad|brilliant"),
    re.I)
NEGATIVE = re.compile(r"\b" + _WORD.format(
    r"no|not|nope|don'?t|doesn'?t|didn'?t|can'?t|cannot|won'?t|isn'?t|never|wrong|bad|problem|"
    r"unfortunately|annoy\w*|frustrat\w*|terrible|useless|hate|disappoint\w*|confus\w*|worse|awful"), re.I)
APOLOGY = re.compile(r"\b" + _WORD.format(
    r"sorry|apologi[sz]e\w*|apologies|unfortunately|unable|can'?t|cannot|couldn'?t|no (?:results?|matches|"
    r"availability)|not available|i'?m afraid"), re.I)

FEATURES = ("log_user_turns", "log_user_words_per_turn", "questions", "thanks", "praise", "negative",
            "assistant_apologies", "early_questions", "early_thanks", "early_praise", "early_negative",
            "early_assistant_apologies")


def _cues(user: Sequence[str], assistant: Sequence[str]) -> list[int]:
    users = "\n".join(user)
    return [users.count("?"), len(THANKS.findall(users)), len(PRAISE.findall(users)), len(NEGATIVE.findall(users)),
            len(APOLOGY.findall("\n".join(assistant)))]


def conversation_cues(conversation: Conversation) -> list[float]:
    """The twelve raw values of :data:`FEATURES` (counts; the first two are turns and mean words per turn)."""
    pairs = user_turns_in_context(conversation)
    user, answers = [p.user for p in pairs], [p.context for p in pairs[1:]] + [_after_last(conversation)]
    words = sum(len(u.split()) for u in user) / max(len(user), 1)
    early = _cues(user[:EARLY_TURNS], answers[:EARLY_TURNS])
    return [float(len(conversation.user_turns)), words, *map(float, _cues(user, answers)), *map(float, early)]


def _after_last(conversation: Conversation) -> str:
    """The assistant text after the last user turn (each user turn is answered by what follows it)."""
    tail: list[str] = []
    for turn in reversed(conversation.turns):
        if turn.role == "user":
            break
        if turn.role == "assistant":
            tail.append(turn.text)
    return "\n".join(reversed(tail))


class LexiconFeaturizer(TransformerMixin, BaseEstimator):
    """Twelve scaled log counts of conversation cues (:data:`FEATURES`).

    >>> from monitor.contracts.events import Turn
    >>> c = Conversation(conversation_id="c", turns=[Turn(index=0, role="user", text="any trains?"),
    ...     Turn(index=1, role="assistant", text="Sorry, none."), Turn(index=2, role="user", text="thanks")])
    >>> conversation_cues(c)
    [2.0, 1.5, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    """

    name = "lexicon"

    def __init__(self, *, weight: float = 3.0) -> None:
        self.weight = weight

    def _validate(self) -> None:
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or self.weight < 0:
            raise ConfigError(
                f"The 'weight' parameter of LexiconFeaturizer must be a float >= 0. Got {self.weight!r} instead.")

    def fit(self, X: Sequence[Conversation], y: object = None) -> LexiconFeaturizer:
        """Nothing to learn; validates the parameter."""
        self._validate()
        return self

    def transform(self, X: Sequence[Conversation]) -> np.ndarray:
        self._validate()
        conversations = check_conversations(X, type(self).__name__)
        counts = np.array([conversation_cues(c) for c in conversations], dtype=np.float32).reshape(-1, len(FEATURES))
        return (np.log1p(counts) / 3 * np.float32(self.weight)).astype(np.float32)

    def get_feature_names_out(self, input_features: object = None) -> np.ndarray:
        return np.asarray([f"lexicon_{name}" for name in FEATURES], dtype=object)
