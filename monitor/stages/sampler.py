"""Active learning for the router: send the judge what the distilled models are least sure of.

The router already sends a uniform slice to the judge (``in_sample(id, r)``, probability r).
On top of it, a distilled-scored conversation x with uncertainty u(x) is sent with probability

    q(x) = min(q_max, max(q_floor, a * u(x) / mean_u))

where ``a = active_rate`` is the extra fraction of traffic to spend (on average) and ``mean_u`` a
running mean of u, so the extra judge load stays near ``a`` whatever the models' confidence.
The two draws are independent hashes of the conversation id, so x reaches the judge with

    pi(x) = r + (1 - r) * q(x)

and every judged conversation (uniform or active) carries the importance weight ``1 / pi(x)``
(``ScoreRecord.sample_weight``). Judge-based rates are then estimated without bias by
Horvitz-Thompson, ``sum_judged(w * y) / N`` (N = all scored conversations), or by the Hajek ratio
``sum(w * y) / sum(w)`` (consistent, lower variance, what a Prometheus ratio of weighted sums
computes). Unweighted judge rates would over-represent uncertain conversations.

pi(x) must be positive for every x: with r = 0, set ``q_floor > 0``. ``mean_u`` only moves with
the uncertainties seen (never with the draws), so pi(x) is fixed before the coin is tossed.

References: Horvitz & Thompson (1952), "A generalization of sampling without replacement from a
finite universe", JASA 47; Hajek (1971); importance-weighted active learning, Beygelzimer et al. (2009).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from monitor.contracts.errors import ConfigError
from monitor.contracts.scores import ScoreRecord

Measure = Literal["margin", "entropy"]


def uncertainty(probabilities: Sequence[float], *, measure: Measure = "margin") -> float:
    """Uncertainty in [0, 1] of one conversation: the max over items (the least certain item decides).

    ``margin``: 1 - |2p - 1|; ``entropy``: binary entropy in bits.

    >>> uncertainty([0.99, 0.5]), round(uncertainty([0.9], measure="entropy"), 3)
    (1.0, 0.469)
    """
    if not probabilities:
        return 0.0
    if measure == "margin":
        return max(1.0 - abs(2.0 * p - 1.0) for p in probabilities)
    if measure == "entropy":
        return max(0.0 if p in (0.0, 1.0) else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
                   for p in probabilities)
    raise ConfigError(f"uncertainty measure must be 'margin' or 'entropy'. Got {measure!r} instead.")


def record_uncertainty(record: ScoreRecord, *, measure: Measure = "margin") -> float:
    return uncertainty([i.probability for i in record.items if i.probability is not None], measure=measure)


def unit_uniform(conversation_id: str, salt: str) -> float:
    """A reproducible U[0, 1) draw per (conversation, salt); salts make draws independent."""
    digest = hashlib.blake2b(f"{salt}\x00{conversation_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True)
class ActiveDecision:
    send: bool  # send to the judge as an active-learning pick
    q: float  # probability of the active pick
    pi: float  # total probability of reaching the judge (uniform slice or active pick)
    uncertainty: float

    @property
    def weight(self) -> float:
        """Importance weight 1 / pi for the judge's record of this conversation."""
        return 1.0 / self.pi


class ActiveSampler:
    """Uncertainty sampling with known inclusion probabilities, on top of a uniform judge slice."""

    def __init__(
        self, *, base_rate: float, active_rate: float, measure: Measure = "margin", q_floor: float = 0.0,
        q_max: float = 1.0, ema: float = 0.01, initial_mean: float = 0.5, salt: str = "convmon-active",
    ) -> None:
        for name, value in (("base_rate", base_rate), ("active_rate", active_rate), ("q_floor", q_floor),
                            ("q_max", q_max), ("ema", ema), ("initial_mean", initial_mean)):
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"The {name!r} parameter of ActiveSampler must be in [0, 1]. Got {value!r} instead.")
        if base_rate == 0.0 and q_floor == 0.0 and active_rate > 0.0:
            raise ConfigError("with base_rate=0 set q_floor > 0: every conversation needs a positive inclusion "
                              "probability for unbiased judge-based rates")
        self.base_rate, self.active_rate, self.measure = base_rate, active_rate, measure
        self.q_floor, self.q_max, self.ema, self.salt = q_floor, q_max, ema, salt
        self._mean_u = max(initial_mean, 1e-6)

    def q(self, u: float) -> float:
        """Active-pick probability for uncertainty ``u`` at the current running mean."""
        if self.active_rate == 0.0:
            return 0.0
        return min(self.q_max, max(self.q_floor, self.active_rate * u / self._mean_u))

    def inclusion(self, u: float) -> float:
        """pi(x) = r + (1 - r) q(x): the weight's denominator, also for uniform-slice records."""
        return self.base_rate + (1.0 - self.base_rate) * self.q(u)

    def decide(self, conversation_id: str, u: float) -> ActiveDecision:
        """Decide for a conversation *outside* the uniform slice, then update the running mean."""
        q = self.q(u)
        decision = ActiveDecision(send=unit_uniform(conversation_id, self.salt) < q, q=q,
                                  pi=self.base_rate + (1.0 - self.base_rate) * q, uncertainty=u)
        self.observe(u)
        return decision

    def decide_record(self, record: ScoreRecord) -> ActiveDecision:
        return self.decide(record.conversation_id, record_uncertainty(record, measure=self.measure))

    def observe(self, u: float) -> None:
        """Fold one uncertainty into the running mean (call for uniform-slice shadow scores too)."""
        self._mean_u = max((1.0 - self.ema) * self._mean_u + self.ema * u, 1e-6)


def horvitz_thompson(values: Sequence[float], weights: Sequence[float], population: int) -> float:
    """Unbiased population mean from judged values and their weights 1/pi."""
    return sum(w * y for w, y in zip(weights, values, strict=True)) / population


def hajek(values: Sequence[float], weights: Sequence[float]) -> float:
    """Ratio estimator sum(w y) / sum(w): consistent, needs no population count."""
    total = sum(weights)
    return sum(w * y for w, y in zip(weights, values, strict=True)) / total if total else float("nan")
