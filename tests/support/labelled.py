"""Synthetic judge-labelled conversations whose user turns contain an item's phrase exactly when the judge says yes:
a distilled model can learn them, so retraining and promotion have something to find."""

from __future__ import annotations

import random

from monitor.contracts.events import Conversation, Turn
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord, aggregate_r
from monitor.contracts.settings import REPO_ROOT

PHRASES = {
    "sat.gratitude": ["thanks so much", "thank you, that helps a lot", "much appreciated, thanks"],
    "dsat.negative_feedback": ["that is wrong", "this answer is useless", "not helpful at all, wrong again"],
    "dsat.repetition": ["you already said that", "same answer again, I asked twice", "you keep repeating yourself"],
}


TOPICS = ["how do I bake bread", "what is the capital of peru", "explain recursion", "fix my python import error",
          "plan a trip to rome", "write a haiku about autumn", "convert 5 miles to km", "summarize this article"]


def rubric() -> RubricSet:
    return load_rubric_set("spur-copilot", REPO_ROOT / "prompts")


def synth(n: int, seed: int, *, now: float = 1_700_000_000.0) -> list[tuple]:
    """Conversations whose user turns contain an item's phrase exactly when the judge says yes."""
    rng = random.Random(seed)
    rub = rubric()
    pairs = []
    for k in range(n):
        present = {item for item in PHRASES if rng.random() < 0.35}
        turns = [rng.choice(TOPICS)] + [rng.choice(PHRASES[i]) for i in sorted(present)] + [rng.choice(TOPICS)]
        rng.shuffle(turns)
        convo = Conversation(conversation_id=f"s{seed}-{k}", turns=[
            Turn(index=2 * i + j, role=role, text=text if role == "user" else "here is an answer")
            for i, text in enumerate(turns) for j, role in enumerate(("user", "assistant"))])
        items = [ItemResult(item_id=it.id, polarity=it.polarity, verdict=it.id in present,
                            score=7.0 if it.id in present else 0.0) for it in rub.items]
        pairs.append((convo, ScoreRecord(conversation_id=convo.conversation_id, scorer="llm", judge="simulated",
                                         rubric_set=rub.id, rubric_version=rub.version, model_version="sim",
                                         items=items, R=aggregate_r(items), scored_at=now - k)))
    return pairs
