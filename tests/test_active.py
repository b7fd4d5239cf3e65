"""Active learning: uncertainty measures, inclusion probabilities, and unbiased weighted judge rates."""

from __future__ import annotations

import random
import statistics

import pytest

from monitor.contracts.errors import ConfigError
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.stages.sampler import (
    ActiveSampler,
    hajek,
    horvitz_thompson,
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


def test_hash_draws_are_uniform_and_salted() -> None:
    draws = [unit_uniform(f"c{i}", "s") for i in range(20000)]
    assert abs(statistics.mean(draws) - 0.5) < 0.01 and abs(sum(d < 0.1 for d in draws) / 20000 - 0.1) < 0.01
    assert unit_uniform("c1", "s") == unit_uniform("c1", "s") != unit_uniform("c1", "t")


def test_sampler_parameters_and_probabilities() -> None:
    with pytest.raises(ConfigError, match="'active_rate' parameter of ActiveSampler must be in \\[0, 1\\]. Got 2"):
        ActiveSampler(base_rate=0.1, active_rate=2)
    with pytest.raises(ConfigError, match="with base_rate=0 set q_floor > 0"):
        ActiveSampler(base_rate=0.0, active_rate=0.1)
    sampler = ActiveSampler(base_rate=0.1, active_rate=0.2, initial_mean=0.5)
    assert sampler.q(1.0) == pytest.approx(0.4) and sampler.q(0.0) == 0.0
    assert sampler.inclusion(1.0) == pytest.approx(0.1 + 0.9 * 0.4)
    off = ActiveSampler(base_rate=0.1, active_rate=0.0)
    assert off.decide("c", 1.0).weight == pytest.approx(10.0) and not off.decide("c", 1.0).send


def test_weighted_judge_rate_is_unbiased_when_uncertainty_correlates_with_the_label() -> None:
    """A fixed population where uncertain conversations are more often DSAT; many independent routings."""
    rng = random.Random(7)
    n, rounds, r, a = 1500, 150, 0.05, 0.10
    population = []
    for i in range(n):
        u = rng.random()
        population.append((f"conv{i}", u, float(rng.random() < 0.05 + 0.6 * u)))
    truth = statistics.mean(y for _, _, y in population)
    ht, hj, naive, extra = [], [], [], []
    for k in range(rounds):
        sampler = ActiveSampler(base_rate=r, active_rate=a, salt=f"active-{k}")
        values, weights, picks = [], [], 0
        for cid, u, y in population:
            if unit_uniform(cid, f"route-{k}") < r:  # the router's uniform slice (shadow-scored)
                pi = sampler.inclusion(u)
                sampler.observe(u)
                judged = True
            else:
                decision = sampler.decide(cid, u)
                pi, judged = decision.pi, decision.send
                picks += decision.send
            if judged:
                values.append(y)
                weights.append(1.0 / pi)
        ht.append(horvitz_thompson(values, weights, n))
        hj.append(hajek(values, weights))
        naive.append(statistics.mean(values))
        extra.append(picks / n)
    se = statistics.stdev(ht) / rounds**0.5
    assert abs(statistics.mean(ht) - truth) < 4 * se  # unbiased
    assert abs(statistics.mean(hj) - truth) < 4 * statistics.stdev(hj) / rounds**0.5 + 0.005
    assert statistics.mean(naive) - truth > 10 * se  # unweighted: biased toward the uncertain (DSAT) cases
    assert abs(statistics.mean(extra) - a * (1 - r)) < 0.03  # the extra judge load stays near active_rate
