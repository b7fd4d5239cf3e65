"""The simulator's ground truth standing in for an LLM judge, labelled ``judge="simulated"``.

Only conversations produced by ``convmon simulate`` carry ``simulated_truth``; anything else is
refused with a ``JudgeError`` (and dead-lettered), never scored by invention.
"""

from __future__ import annotations

import hashlib
import time

from monitor.contracts.errors import JudgeError
from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.scores import ItemResult, ScoreRecord, judge_record


def _intensity(conversation_id: str, item_id: str) -> float:
    """A deterministic 6-10 score for a present pattern, so R has spread like a real judge's."""
    digest = hashlib.blake2b(f"{conversation_id}/{item_id}".encode(), digest_size=2).digest()
    return 6.0 + int.from_bytes(digest, "big") % 5


class SimulatedJudge:
    name = "simulated"

    def __init__(self, rubric: RubricSet) -> None:
        self.rubric = rubric

    async def score(self, conversation: Conversation) -> ScoreRecord:
        started = time.perf_counter()
        truth = conversation.simulated_truth
        if truth is None:
            raise JudgeError(
                "the simulated judge only scores conversations from `convmon simulate`; configure "
                "OPENAI_API_KEY / OPENAI_BASE_URL to judge real traffic",
                reason="no_simulated_truth",
            )
        present = set(truth)
        items = [
            ItemResult(
                item_id=item.id,
                polarity=item.polarity,
                verdict=item.id in present,
                score=_intensity(conversation.conversation_id, item.id) if item.id in present else 0.0,
            )
            for item in self.rubric.items
        ]
        return judge_record(conversation, items, judge=self.name, rubric=self.rubric, model_version="simulated",
                            latency_s=time.perf_counter() - started)

    def accepting(self) -> bool:
        return True

    def on_pace(self) -> bool:
        return True

    async def aclose(self) -> None:
        return None
