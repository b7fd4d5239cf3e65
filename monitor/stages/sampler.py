"""The judge slice's inclusion probability pi(x): a hash floor, raised by uncertainty and by complaints.

Every finished conversation x gets

    pi(x) = max(r, r + (1 - r) * min(1, a * u(x) / u_bar), f * [x has negative feedback])

with ``r = sample_rate`` (the hash slice), ``a = active_learning_rate`` (the extra share of traffic
to spend on average), u(x) the live distilled model's uncertainty about x (the least certain item
decides), ``u_bar`` that model's mean uncertainty on the hash slice of its training data
(cross-validated, stored with the model in the registry), and ``f = active_feedback_rate``. The
conversation goes to the judge when its draw ``hash(salt, id) < pi(x)``. The draw is a function of
the id, and pi of the conversation and the model version (which every record names), so a replay,
a re-delivery or another replica decides the same, and pi is known before the draw is compared.

Because pi >= r and one draw decides, the conversations with ``draw < r`` form a uniform slice of
rate r whatever the boost (``sampled_by="hash"``): the hash-only holdout the promotion gate and the
drift reference use. When budget pacing pauses the boosts, pi = r and that pi is what is recorded.

Every judged conversation carries ``pi`` and the weight ``1 / pi`` (``ScoreRecord.sample_weight``).
Judge-based rates are the Hajek ratio ``sum(w * y) / sum(w)`` (what a Prometheus ratio of the
weighted sums computes); Horvitz-Thompson ``sum(w * y) / N`` needs the population count N.
Unweighted judge rates would over-represent uncertain and complaining conversations.

References: Horvitz & Thompson (1952), "A generalization of sampling without replacement from a
finite universe", JASA 47; Hajek (1971); importance-weighted active learning, Beygelzimer et al. (2009).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from monitor.contracts.errors import ConfigError
from monitor.contracts.scores import SampledBy, ScoreRecord
from monitor.contracts.uncertainty import Measure, uncertainty
from monitor.stages.route import hash_unit as _hash_unit

MODEL_VERSIONS_KEPT = 32  # u_bar of the newest versions only: a batch is scored by the live one (memory stays flat)


def record_uncertainty(record: ScoreRecord, *, measure: Measure = "margin") -> float:
    return uncertainty([i.probability for i in record.items if i.probability is not None], measure=measure)


def unit_uniform(conversation_id: str, salt: str) -> float:
    """A reproducible U[0, 1) draw per (conversation, salt); salts make draws independent."""
    digest = hashlib.blake2b(f"{salt}\x00{conversation_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64




@dataclass(frozen=True)
class Inclusion:
    judge: bool  # draw < pi
    pi: float  # the inclusion probability the decision used (after budget throttling)
    sampled_by: SampledBy  # hash when draw < r (the uniform slice), else what raised pi
    uncertainty: float | None

    @property
    def weight(self) -> float:
        """Importance weight 1 / pi for the judge's record of this conversation."""
        return 1.0 / self.pi


def negative_feedback(feedback: Mapping[str, object] | None) -> bool:
    """A thumbs-down or a CSAT of 1-2."""
    if not feedback:
        return False
    csat = feedback.get("csat")
    return feedback.get("thumbs") == "down" or (isinstance(csat, int) and csat <= 2)


class InclusionPolicy:
    """pi(x) and the deterministic judge decision of the router."""

    def __init__(self, *, base_rate: float, active_rate: float = 0.0, feedback_rate: float = 0.0,
                 measure: Measure = "margin", salt: str = "", default_mean: float = 0.5) -> None:
        for name, value in (("base_rate", base_rate), ("active_rate", active_rate), ("feedback_rate", feedback_rate),
                            ("default_mean", default_mean)):
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"The {name!r} parameter of InclusionPolicy must be in [0, 1]. Got {value!r} "
                                  "instead.")
        if base_rate == 0.0 and (active_rate > 0.0 or feedback_rate > 0.0):
            raise ConfigError("boosted sampling needs base_rate > 0: every conversation needs a positive inclusion "
                              "probability for unbiased judge-based rates")
        self.base_rate, self.active_rate, self.feedback_rate = base_rate, active_rate, feedback_rate
        self.measure, self.salt, self.default_mean = measure, salt, max(default_mean, 1e-6)
        self._means: dict[str, float] = {}  # model version -> its mean uncertainty on its training hash slice

    @property
    def boosted(self) -> bool:
        return self.active_rate > 0.0 or self.feedback_rate > 0.0

    def set_model(self, version: str, mean_uncertainty: float | None) -> None:
        """The normaliser u_bar of a model version (from its registry manifest), for the newest
        ``MODEL_VERSIONS_KEPT`` versions seen (retraining every 15 minutes adds 96 a day)."""
        if mean_uncertainty is not None and mean_uncertainty > 0:
            self._means.pop(version, None)
            self._means[version] = float(mean_uncertainty)
            while len(self._means) > MODEL_VERSIONS_KEPT:
                del self._means[next(iter(self._means))]

    def mean_uncertainty(self, version: str | None) -> float:
        return self._means.get(version or "", self.default_mean)

    def draw(self, conversation_id: str) -> float:
        return route_draw(conversation_id, self.salt)

    def pi(self, *, uncertainty: float | None, model_version: str | None = None, negative: bool = False,
           boost: bool = True) -> tuple[float, SampledBy]:
        """pi(x) and the term that set it (``hash`` when neither boost raised it)."""
        pi: float = self.base_rate
        by: SampledBy = "hash"
        if not boost or self.base_rate == 0.0:
            return pi, by
        if uncertainty is not None and self.active_rate > 0.0:
            q = min(1.0, self.active_rate * uncertainty / self.mean_uncertainty(model_version))
            boosted = self.base_rate + (1.0 - self.base_rate) * q
            if boosted > pi:
                pi, by = boosted, "uncertainty"
        if negative and self.feedback_rate > pi:
            pi, by = self.feedback_rate, "feedback"
        return pi, by

    def decide(self, conversation_id: str, *, probabilities: Sequence[float] | None = None,
               model_version: str | None = None, feedback: Mapping[str, object] | None = None,
               boost: bool = True) -> Inclusion:
        u = uncertainty(probabilities, measure=self.measure) if probabilities else None
        pi, by = self.pi(uncertainty=u, model_version=model_version, negative=negative_feedback(feedback),
                         boost=boost)
        draw = self.draw(conversation_id)
        return Inclusion(judge=draw < pi, pi=pi, sampled_by="hash" if draw < self.base_rate else by, uncertainty=u)


def route_draw(conversation_id: str, salt: str = "") -> float:
    """The router's U[0, 1) draw: the unsalted id hash of the hash slice, or a salted one."""
    return unit_uniform(conversation_id, salt) if salt else _hash_unit(conversation_id)


def horvitz_thompson(values: Sequence[float], weights: Sequence[float], population: int) -> float:
    """Unbiased population mean from judged values and their weights 1/pi."""
    return sum(w * y for w, y in zip(weights, values, strict=True)) / population


def hajek(values: Sequence[float], weights: Sequence[float]) -> float:
    """Ratio estimator sum(w y) / sum(w): consistent, needs no population count."""
    total = sum(weights)
    return sum(w * y for w, y in zip(weights, values, strict=True)) / total if total else float("nan")
