"""The router's inclusion probability: uncertainty measures, pi(x), deterministic draws, unbiased weighted rates."""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest

from monitor.contracts.errors import ConfigError
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.uncertainty import mean_uncertainty
from monitor.stages.route import in_sample
from monitor.stages.sampler import (
    MODEL_VERSIONS_KEPT,
    InclusionPolicy,
    hajek,
    horvitz_thompson,
    negative_feedback,
    record_uncertainty,
    uncertainty,
    unit_uniform,
)


def test_uncertainty_measures() -> None:
    assert uncertainty([0.0, 1.0]) == 0.0 and uncertainty([0.9, 0.5]) == 1.0
    assert uncertainty([0.75]) == pytest.approx(0.5) and uncertainty([]) == 0.0
    assert uncertainty([0.5], measure="entropy") == pytest.approx(1.0)
    assert uncertainty([0.1], measure="entropy") == pytest.approx(uncertainty([0.9], measure="entropy"))
    record = ScoreRecord(conversation_id="c", scorer="distilled", judge="hashing", rubric_set="r", rubric_version="1",
                         model_version="v", R=0.0, items=[
                             ItemResult(item_id="sat.a", polarity="sat", probability=0.95),
                             ItemResult(item_id="dsat.b", polarity="dsat", probability=0.4)])
    assert record_uncertainty(record) == pytest.approx(0.8)
    with pytest.raises(ConfigError, match="must be 'margin' or 'entropy'. Got 'gini'"):
        uncertainty([0.5], measure="gini")  # type: ignore[arg-type]
    matrix = np.array([[0.95, 0.4], [0.5, np.nan], [np.nan, np.nan]])
    assert mean_uncertainty(matrix, "margin") == pytest.approx((0.8 + 1.0) / 2)  # rows without values are skipped


def test_hash_draws_are_uniform_and_salted() -> None:
    draws = [unit_uniform(f"c{i}", "s") for i in range(20000)]
    assert abs(statistics.mean(draws) - 0.5) < 0.01 and abs(sum(d < 0.1 for d in draws) / 20000 - 0.1) < 0.01
    assert unit_uniform("c1", "s") == unit_uniform("c1", "s") != unit_uniform("c1", "t")


def test_policy_parameters_and_probabilities() -> None:
    with pytest.raises(ConfigError, match="'active_rate' parameter of InclusionPolicy must be in \\[0, 1\\]. Got 2"):
        InclusionPolicy(base_rate=0.1, active_rate=2)
    with pytest.raises(ConfigError, match="boosted sampling needs base_rate > 0"):
        InclusionPolicy(base_rate=0.0, active_rate=0.1)
    policy = InclusionPolicy(base_rate=0.1, active_rate=0.2, feedback_rate=0.8)
    policy.set_model("v1", 0.25)
    assert policy.pi(uncertainty=0.0, model_version="v1") == (0.1, "hash")  # floored at the hash rate
    assert policy.pi(uncertainty=0.25, model_version="v1")[0] == pytest.approx(0.1 + 0.9 * 0.2)
    assert policy.pi(uncertainty=1.0, model_version="v1")[0] == pytest.approx(0.1 + 0.9 * 0.8)
    policy.set_model("v2", 0.1)
    assert policy.pi(uncertainty=1.0, model_version="v2") == (1.0, "uncertainty")  # q capped at 1
    assert policy.pi(uncertainty=0.25, model_version="other")[0] == pytest.approx(0.1 + 0.9 * 0.1)  # default mean 0.5
    assert policy.pi(uncertainty=None, negative=True) == (0.8, "feedback")
    assert policy.pi(uncertainty=1.0, model_version="v1", negative=True, boost=False) == (0.1, "hash")  # paced
    assert negative_feedback({"thumbs": "down"}) and negative_feedback({"csat": 2})
    assert not negative_feedback({"thumbs": "up", "csat": 4}) and not negative_feedback(None)


def test_the_policy_keeps_the_newest_model_versions_only() -> None:
    """A worker retraining every 15 minutes for a year must not accumulate 35,000 normalisers."""
    policy = InclusionPolicy(base_rate=0.1, active_rate=0.2)
    for k in range(1000):
        policy.set_model(f"v{k}", 0.2)
    policy.set_model("v968", 0.3)  # seen again: now the newest
    policy.set_model("v1000", 0.4)
    assert len(policy._means) == MODEL_VERSIONS_KEPT
    assert policy.mean_uncertainty("v1000") == 0.4 and policy.mean_uncertainty("v968") == 0.3
    assert policy.mean_uncertainty("v969") == 0.5  # forgotten: the default mean
    assert policy.mean_uncertainty("v999") == 0.2


def test_decisions_are_deterministic_and_the_hash_slice_is_kept_whatever_the_boost() -> None:
    plain = InclusionPolicy(base_rate=0.1)
    boosted = InclusionPolicy(base_rate=0.1, active_rate=0.3, feedback_rate=1.0)
    ids = [f"conv-{i}" for i in range(5000)]
    first = [boosted.decide(c, probabilities=[0.5], feedback={"thumbs": "down"} if i % 7 == 0 else None)
             for i, c in enumerate(ids)]
    again = [boosted.decide(c, probabilities=[0.5], feedback={"thumbs": "down"} if i % 7 == 0 else None)
             for i, c in enumerate(ids)]
    assert first == again  # a replay decides the same
    hashed = {c for c, d in zip(ids, first, strict=True) if d.sampled_by == "hash"}
    assert hashed == {c for c in ids if plain.decide(c).judge} == {c for c in ids if in_sample(c, 0.1)}
    assert all(d.judge for i, d in enumerate(first) if i % 7 == 0)  # feedback_rate 1: every complaint is judged
    assert all(d.sampled_by != "hash" for d in first if not d.judge) and all(d.pi >= 0.1 for d in first)
    salted = InclusionPolicy(base_rate=0.1, salt="tenant-a")
    assert {c for c in ids if salted.decide(c).judge} != hashed


def test_weighted_judge_rate_is_unbiased_when_uncertainty_correlates_with_the_label() -> None:
    """A fixed population where uncertain conversations are more often DSAT; many independently salted routings."""
    rng = random.Random(7)
    n, rounds, r, a = 1500, 150, 0.05, 0.10
    population = []
    for i in range(n):
        p = rng.random()
        u = 1 - abs(2 * p - 1)
        population.append((f"conv{i}", p, float(rng.random() < 0.05 + 0.6 * u)))
    truth = statistics.mean(y for _, _, y in population)
    mean_u = statistics.mean(1 - abs(2 * p - 1) for _, p, _ in population)
    ht, hj, naive, extra = [], [], [], []
    for k in range(rounds):
        policy = InclusionPolicy(base_rate=r, active_rate=a, salt=f"route-{k}")
        policy.set_model("v", mean_u)
        values, weights, picks = [], [], 0
        for cid, p, y in population:
            decision = policy.decide(cid, probabilities=[p], model_version="v")
            if decision.judge:
                values.append(y)
                weights.append(decision.weight)
                picks += decision.sampled_by != "hash"
        ht.append(horvitz_thompson(values, weights, n))
        hj.append(hajek(values, weights))
        naive.append(statistics.mean(values))
        extra.append(picks / n)
    se = statistics.stdev(ht) / rounds**0.5
    assert abs(statistics.mean(ht) - truth) < 4 * se  # unbiased
    assert abs(statistics.mean(hj) - truth) < 4 * statistics.stdev(hj) / rounds**0.5 + 0.005
    assert statistics.mean(naive) - truth > 10 * se  # unweighted: biased toward the uncertain (DSAT) cases
    assert abs(statistics.mean(extra) - a * (1 - r)) < 0.03  # the extra judge load stays near active_rate
