"""One labelled conversation as the label store keeps it: redacted turns, the judge's items, feedback.

The record is the unit that flows from the judge's score to training (``distill.train``) and to JSONL
exports; :class:`distill.store.LabelStore` only knows how to keep it in a table.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from monitor.contracts.errors import StoreError
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.scores import ItemResult, SampledBy, ScoreRecord

Redact = Callable[[str], str]


def no_redaction(text: str) -> str:
    """The default ``redact``: text as it is (the worker passes the judge's redactor)."""
    return text


class LabelRecord(BaseModel):
    """One teacher-labelled conversation: redacted turns, the judge's items, human feedback."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    conversation_id: str
    rubric_set: str
    rubric_version: str
    judge: str
    model_version: str = ""
    turns: list[Turn] = Field(min_length=1)
    items: list[ItemResult]
    R: float = 0.0
    thumbs: str | None = None
    csat: int | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    labelled_at: float = Field(default_factory=time.time)
    ended_at: float | None = None
    # the router's inclusion probability and what sampled it; None on labels from before the sampler,
    # which were all hash-slice picks
    inclusion_probability: float | None = Field(default=None, gt=0, le=1)
    sampled_by: SampledBy | None = None

    @property
    def in_hash_slice(self) -> bool:
        """A member of the uniform hash slice: the population the holdout and drift reference must come from."""
        return self.sampled_by in (None, "hash")

    @property
    def rubric_key(self) -> str:
        return f"{self.rubric_set}@{self.rubric_version}"

    @classmethod
    def from_score(cls, conversation: Conversation, score: ScoreRecord, *,
                   redact: Redact = no_redaction) -> LabelRecord:
        """Pair a conversation with its judge score; distilled scores are predictions, not labels."""
        if score.scorer != "llm":
            raise StoreError(f"only judge (scorer='llm') records are labels; got scorer={score.scorer!r}")
        if score.conversation_id != conversation.conversation_id:
            raise StoreError(
                f"score for {score.conversation_id!r} paired with conversation {conversation.conversation_id!r}"
            )
        feedback = conversation.feedback
        return cls(
            conversation_id=conversation.conversation_id, rubric_set=score.rubric_set,
            rubric_version=score.rubric_version, judge=score.judge, model_version=score.model_version,
            turns=[t.model_copy(update={"text": redact(t.text) or "[redacted]"}) for t in conversation.turns],
            items=[i.model_copy(update={"explanation": redact(i.explanation)}) if i.explanation else i
                   for i in score.items],  # a judge's reason may quote the user
            R=score.R, thumbs=feedback.thumbs if feedback else None,
            csat=feedback.csat if feedback else None, labelled_at=score.scored_at,
            metadata={key: redact(value) for key, value in conversation.metadata.items()},
            ended_at=conversation.ended_at, inclusion_probability=score.inclusion_probability,
            sampled_by=score.sampled_by,
        )

    def conversation(self) -> Conversation:
        feedback = {"thumbs": self.thumbs, "csat": self.csat} if (self.thumbs or self.csat) else None
        return Conversation.model_validate(
            {"conversation_id": self.conversation_id, "turns": [t.model_dump() for t in self.turns],
             "metadata": self.metadata, "feedback": feedback, "ended_at": self.ended_at}
        )

    def verdicts(self) -> dict[str, bool | None]:
        return {item.item_id: item.verdict for item in self.items}
