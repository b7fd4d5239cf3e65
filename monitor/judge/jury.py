"""AMULET-style jury: several judges (models, or rubric-order permutations of one model) per conversation.

An item is accepted when every member gives the same verdict (scores and probabilities are then
averaged); otherwise it is recorded as uncertain (``verdict=None``, ``uncertain=True``, no score,
so it adds nothing to R) and counted in ``convmon_jury_disagreements``. Every member must answer:
a member's failure fails the conversation, because agreement among fewer judges means something else.
"""

from __future__ import annotations

import asyncio
import random
from statistics import fmean
from typing import Protocol

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricItem
from monitor.contracts.scores import ItemResult
from monitor.judge.ask import Scored


class Scorer(Protocol):
    items: list[RubricItem]

    async def score_items(self, conversation: Conversation) -> Scored: ...


def permuted(items: list[RubricItem], index: int) -> list[RubricItem]:
    """Member ``index``'s rubric order: the original for 0, a fixed seeded shuffle otherwise."""
    if index == 0:
        return list(items)
    order = list(items)
    random.Random(index).shuffle(order)
    return order


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if len(present) == len(values) and present else None


def merge(votes: list[list[ItemResult]], metrics: Metrics) -> list[ItemResult]:
    """One result per item from the members' results (each list in any order, same item ids)."""
    by_member = [{r.item_id: r for r in member} for member in votes]
    merged = []
    for first in votes[0]:
        results = [member[first.item_id] for member in by_member]
        verdicts = {r.verdict for r in results}
        if len(verdicts) == 1 and not any(r.uncertain for r in results):
            merged.append(
                first.model_copy(
                    update={
                        "score": _mean([r.score for r in results]),
                        "probability": _mean([r.probability for r in results]),
                        "mass": _mean([r.mass for r in results]),
                    }
                )
            )
        else:
            metrics.jury_disagreements.labels(first.item_id).inc()
            merged.append(ItemResult(item_id=first.item_id, polarity=first.polarity, verdict=None, uncertain=True))
    return merged


class JuryScorer:
    def __init__(self, members: list[Scorer], metrics: Metrics) -> None:
        if len(members) < 2:
            raise ValueError(f"The 'members' parameter of JuryScorer must hold at least 2 scorers. Got {len(members)}.")
        self.members = members
        self.metrics = metrics
        self.items = members[0].items

    async def score_items(self, conversation: Conversation) -> Scored:
        outcomes = await asyncio.gather(*(m.score_items(conversation) for m in self.members), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        done: list[Scored] = [o for o in outcomes if isinstance(o, Scored)]
        scored = Scored(items=merge([s.items for s in done], self.metrics))
        for s in done:
            scored.usage += s.usage
            scored.cost_usd += s.cost_usd
            scored.calls += s.calls
            scored.truncated |= s.truncated
            scored.repaired |= s.repaired
            scored.models |= s.models
        return scored
