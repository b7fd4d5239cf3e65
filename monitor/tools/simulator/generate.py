"""Synthetic conversations with known ground truth: which rubric patterns the user exhibits.

Each conversation opens with a question and an answer from one of the topics, then the user
shows zero or more patterns drawn independently with per-item probabilities (the *mix*). A DSAT
spike multiplies every DSAT probability, the regression an alert should catch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from monitor.contracts.rubric_set import RubricSet
from monitor.tools.simulator.patterns import (
    ASSISTANT_CLOSING,
    ASSISTANT_FOLLOW,
    DERIVED,
    FRUSTRATION,
    LAST,
    NEUTRAL,
    PATTERNS,
    TOPICS,
)

DEFAULT_SAT_RATE = 0.12
DEFAULT_DSAT_RATE = 0.05
APPS = ("web", "mobile", "api")
LOCALES = ("en-US", "en-GB", "en-IN")
MODEL_VERSIONS = ("assistant-v1", "assistant-v2")


def default_mix(rubric: RubricSet) -> dict[str, float]:
    return {
        item.id: DEFAULT_SAT_RATE if item.polarity == "sat" else DEFAULT_DSAT_RATE
        for item in rubric.items
        if item.id in PATTERNS and item.id not in DERIVED
    }


@dataclass
class SimConversation:
    conversation_id: str
    events: list[dict[str, Any]]
    truth: list[str] = field(default_factory=list)


class ConversationGenerator:
    def __init__(self, rubric: RubricSet, *, mix: dict[str, float] | None = None, seed: int = 0,
                 max_patterns: int = 3) -> None:
        self.rubric = rubric
        self.mix = mix if mix is not None else default_mix(rubric)
        unknown = sorted(set(self.mix) - set(PATTERNS) - DERIVED)
        if unknown:
            raise ValueError(f"the simulator has no utterances for items {unknown}; known: {sorted(PATTERNS)}")
        self.max_patterns = max_patterns
        self._rng = random.Random(seed)

    def _draw(self, dsat_factor: float) -> list[str]:
        chosen = []
        for item_id, p in self.mix.items():
            if item_id.startswith("dsat."):
                p = min(1.0, p * dsat_factor)
            if self._rng.random() < p:
                chosen.append(item_id)
        self._rng.shuffle(chosen)
        chosen = chosen[: self.max_patterns]
        chosen.sort(key=lambda item: item in LAST)  # a sudden end comes last
        return chosen

    def generate(self, conversation_id: str, start: float, *, dsat_factor: float = 1.0,
                 end_event: bool = True) -> SimConversation:
        rng = self._rng
        question, answer, detail = rng.choice(TOPICS)
        slots = {"question": question, "question_lower": question[0].lower() + question[1:], "detail": detail,
                 "answer_lower": answer[0].lower() + answer[1:]}
        said = self._draw(dsat_factor)
        utterances = [rng.choice(PATTERNS[item]).format(**slots) for item in said]
        if rng.random() < 0.3:
            at = len(utterances) - 1 if said and said[-1] in LAST else len(utterances)
            utterances.insert(rng.randrange(at + 1), rng.choice(NEUTRAL).format(**slots))
        truth = list(said)
        if "sat.no_frustration" in self.rubric.item_ids and not FRUSTRATION & set(said):
            truth.append("sat.no_frustration")
        metadata = {"app": rng.choice(APPS), "locale": rng.choice(LOCALES),
                    "model_version": rng.choice(MODEL_VERSIONS)}
        turns = [("user", question), ("assistant", answer)]
        for n, text in enumerate(utterances):
            turns.append(("user", text))
            if n == len(utterances) - 1 and said and said[-1] in LAST:
                break  # the user leaves without an answer
            reply = rng.choice(ASSISTANT_CLOSING if text in PATTERNS["sat.gratitude"] else ASSISTANT_FOLLOW)
            turns.append(("assistant", reply.format(**slots)))
        t = start
        events: list[dict[str, Any]] = []
        for index, (role, text) in enumerate(turns):
            t += rng.uniform(0.5, 3.0)
            events.append({"type": "turn", "conversation_id": conversation_id, "turn_index": index, "role": role,
                           "text": text, "timestamp": round(t, 3), "metadata": metadata if index == 0 else {}})
        if end_event:
            end: dict[str, Any] = {"type": "end", "conversation_id": conversation_id, "timestamp": round(t + 1, 3),
                                   "turn_count": len(turns), "simulated_truth": truth}
            feedback = self._feedback(truth)
            if feedback:
                end["feedback"] = feedback
            events.append(end)
        return SimConversation(conversation_id, events, truth)

    def _feedback(self, truth: list[str]) -> dict[str, Any] | None:
        if any(t.startswith("dsat.") for t in truth) and self._rng.random() < 0.3:
            return {"thumbs": "down"}
        if {"sat.praise", "sat.gratitude"} & set(truth) and self._rng.random() < 0.3:
            return {"thumbs": "up"}
        return None
