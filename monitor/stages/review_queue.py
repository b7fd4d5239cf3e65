"""Which judged conversations people are asked to review, each with its inclusion probability.

Flagged conversations (the judge said yes to a DSAT item) enter the queue with probability
``min(1, budget / expected_flagged)``, the others with ``unflagged_rate``: a design, not first come up to a budget,
so the human labels give unbiased estimates of the judge's precision *and* recall
(:mod:`monitor.stages.human_agreement` weights each by ``1 / pi``). Membership is a hash draw of the conversation
id, independent of the judge slice's (another salt), so every reviewer and every restart sees the same queue.

>>> review_probability(True, budget_per_day=50, flagged_per_day=200, unflagged_rate=0.02)
0.25
>>> review_probability(False, budget_per_day=50, flagged_per_day=200, unflagged_rate=0.02)
0.02
"""

from __future__ import annotations

from monitor.contracts.rubric_set import RubricSet
from monitor.stages.sampler import unit_uniform

SALT = "convmon-review"


def review_probability(flagged: bool, *, budget_per_day: float, flagged_per_day: float,
                       unflagged_rate: float) -> float:
    """The inclusion probability of a judged conversation in the review queue."""
    if flagged:
        return min(1.0, budget_per_day / flagged_per_day) if flagged_per_day > 0 else 1.0
    return unflagged_rate


def in_queue(conversation_id: str, pi: float, salt: str = "") -> bool:
    """The conversation's review draw falls under ``pi``."""
    return unit_uniform(conversation_id, f"{SALT}\x00{salt}") < pi


def flagged(verdicts: dict[str, bool | None], rubric: RubricSet) -> bool:
    """The judge said yes to at least one DSAT item."""
    return any(verdicts.get(item.id) is True for item in rubric.items if item.polarity == "dsat")
