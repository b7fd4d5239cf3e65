"""Which conversations go to the LLM judge.

The uniform slice is a hash of the conversation id compared with the sample rate, so every
replica (and every re-delivery) makes the same decision without coordination. Judge-sampled
conversations are also scored by the distilled path as a shadow, to measure agreement.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

_SCALE = float(2**64)


def hash_unit(conversation_id: str) -> float:
    """A stable, uniform number in [0, 1) for a conversation id."""
    digest = hashlib.blake2b(conversation_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


def in_sample(conversation_id: str, rate: float) -> bool:
    return hash_unit(conversation_id) < rate


@dataclass(frozen=True)
class Route:
    judge: bool
    reason: Literal["sample", "not_sampled", "budget_exhausted"]
    sample_weight: float = 1.0  # inverse inclusion probability, for unbiased judge-based rates


def route(conversation_id: str, *, rate: float, judge_accepting: bool) -> Route:
    if not in_sample(conversation_id, rate):
        return Route(judge=False, reason="not_sampled")
    if not judge_accepting:
        return Route(judge=False, reason="budget_exhausted")
    return Route(judge=True, reason="sample", sample_weight=1.0 / rate)
