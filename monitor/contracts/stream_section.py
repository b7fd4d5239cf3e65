"""The hot path's settings section: sessionizing, the judge slice, batching and the size limits on input."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


class StreamSettings(BaseModel):
    """The hot path: sessionizing, the judge slice, batching and the size limits on input."""

    model_config = ConfigDict(frozen=True)

    data_dir: Path = Path("var")
    sample_rate: float = Field(default=0.1, ge=0.0, le=1.0)
    idle_timeout_s: float = Field(default=300.0, gt=0)
    closed_retention_s: float = Field(default=3600.0, gt=0)
    dedup_window_s: float = Field(default=2 * 86400.0, gt=0)
    classify_batch: int = Field(default=256, ge=1)
    classify_within_s: float = Field(default=0.2, gt=0)
    max_event_bytes: int = Field(default=1_000_000, ge=1024)
    max_turns: int = Field(default=200, ge=2)
    max_chars: int = Field(default=100_000, ge=100)
    max_conversation_bytes: int = Field(default=262_144, ge=4096)  # JSON bytes of a session's turns
    max_metadata_bytes: int = Field(default=8192, ge=256)  # JSON bytes of a session's merged metadata
    max_request_bytes: int = Field(default=1_048_576, ge=65_536)  # the producer's max_request_size
    allowed_lateness_s: float = Field(default=5.0, ge=0)  # grace for turns after an end without turn_count
    max_open_conversations: int = Field(
        default=50_000, ge=1,
        description="Open conversations kept per input partition. At the cap, a new conversation first finishes "
                    "the partition's least recently active one early (end_reason idle, counted in "
                    "convmon_conversations_evicted_total{reason=\"max_open_conversations\"}); its later turns "
                    "reopen it as a new revision within the reopen window, else are late events. Bounds worker "
                    "memory whatever the input (about 2.5 KB each, docs/deployment.md).")
    max_closed_conversations: int = Field(
        default=100_000, ge=1000,
        description="Finished conversations remembered per input partition (a tombstone each, about 0.6 KB: "
                    "when and with how many turns it closed), for reopen_window_s + closed_retention_s, so a "
                    "redelivered event is skipped and a late one reopens it or is dead-lettered late_event. At "
                    "the cap the oldest is forgotten (convmon_closed_conversations_forgotten_total): a later event "
                    "of it starts a new conversation under its id, counted again. Bounds memory at any traffic: "
                    "raise it with the pod's memory where a partition finishes more than this many conversations "
                    "in reopen_window_s + closed_retention_s (docs/operations.md).")
    incomplete_conversations: Literal["dead_letter", "score"] = Field(
        default="dead_letter",
        description="A conversation with a rejected turn: 'dead_letter' sends it whole to the dead-letter topic "
                    "(reason conversation_incomplete, naming the turn and field); 'score' scores the turns that "
                    "remain, its score records and evaluation events marked incomplete. Counted either way in "
                    "convmon_conversations_incomplete_total{action}.")
    reopen_window_s: float = Field(
        default=86_400.0, ge=0,
        description="How long a scored conversation can be continued (default a day): a turn (or end) for it "
                    "within this window opens a new revision holding the whole conversation so far, which closes "
                    "like any conversation and is scored again (the distilled models always, the judge if the "
                    "conversation is in its slice); the new revision's counts replace the previous one's "
                    "(docs/metrics.md, Revisions). Past the window (and for closed_retention_s more) such an event "
                    "is dead-lettered late_event. 0 turns reopening off: a closed conversation's turns are deleted "
                    "at once, and every later event of it is dead-lettered late_event.")
    reopen_max_conversations: int = Field(
        default=10_000, ge=1,
        description="Scored conversations kept for reopening per input partition (their redacted turns, as an "
                    "open conversation keeps them, and a revision-ledger entry per scorer). At the cap the oldest "
                    "closed one is no longer reopenable: its later events are dead-lettered late_event. Bounds "
                    "memory and the state changelog: about 8 KB each for 6-turn conversations (docs/operations.md, "
                    "bench open-conversations).")
    event_batch: int = Field(default=1000, ge=1)  # records per hot-path batch (runtime/hotbatches.py)
    dedup_max_keys: int = Field(default=200_000, ge=1000)  # dedup marks kept per partition
    # The judge slice's inclusion probability pi(x) (monitor/stages/sampler.py): at least sample_rate,
    # raised by the distilled models' uncertainty (active_learning_rate: the extra share of traffic to spend on
    # average) and by negative user feedback (active_feedback_rate: pi of a thumbs-down / CSAT <= 2 conversation).
    # A conversation goes to the judge when hash(sample_salt, id) < pi(x); the empty salt is the hash of before.
    active_learning_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    active_feedback_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    active_uncertainty_measure: Literal["margin", "entropy"] = "margin"
    active_budget_pacing: bool = True  # boosts pause while the day's judge spend runs ahead of the day
    sample_salt: str = ""
    input_idle_warn_s: float = Field(
        default=300.0, ge=10.0,
        description="A worker that has consumed no input record for this long (since its start or its last record) "
                    "logs one warning naming the input topic; convmon_input_idle_seconds always shows the time.")

    @model_validator(mode="after")
    def _check_sampler(self) -> Self:
        if self.sample_rate == 0.0 and (self.active_learning_rate > 0.0 or self.active_feedback_rate > 0.0):
            raise ValueError(
                "active_learning_rate / active_feedback_rate need sample_rate > 0: the hash rate is the floor of "
                "every conversation's inclusion probability, and a conversation the judge can never see makes "
                "judge-based rates biased"
            )
        return self

    # Dead letters keep the original bytes only when this is set; by default they carry the redacted
    # text, with the original size and the reason in headers.
    dead_letter_raw: bool = False

    @model_validator(mode="after")
    def _check_bounds(self) -> Self:
        """Every session, finished conversation and record must fit one produce request."""
        worst = self.max_conversation_bytes + self.max_metadata_bytes + self.max_turns * 96 + 16_384
        if worst > self.max_request_bytes:
            raise ValueError(
                f"max_conversation_bytes + max_metadata_bytes + max_turns * 96 + 16 KiB = {worst} exceeds "
                f"max_request_bytes={self.max_request_bytes}: a finished conversation would not fit one "
                "produce request; lower the caps or raise max_request_bytes (and the broker's message.max.bytes)"
            )
        return self
