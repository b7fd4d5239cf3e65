"""The judge contract: a conversation in, one ``llm`` score record out, or a ``JudgeError``."""

from __future__ import annotations

from typing import Protocol

from monitor.contracts.events import Conversation
from monitor.contracts.scores import ScoreRecord


class Judge(Protocol):
    name: str  # the ``judge`` label: "simulated", "openai:gpt-4o-mini", "jury:3"

    async def score(self, conversation: Conversation) -> ScoreRecord:
        """Score every rubric item; raise a ``JudgeError`` subclass when that is impossible."""
        ...

    def accepting(self) -> bool:
        """False while the judge must not be sent work (daily budget spent)."""
        ...

    def on_pace(self) -> bool:
        """False while spend runs ahead of the day's budget: the router then samples the hash slice only."""
        ...

    async def aclose(self) -> None: ...
