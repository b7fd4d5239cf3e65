from __future__ import annotations

from monitor.stages.route import hash_unit, in_sample, route


def test_sampling_is_deterministic_and_close_to_the_rate() -> None:
    ids = [f"conv-{i}" for i in range(20_000)]
    picked = [in_sample(i, 0.1) for i in ids]
    assert picked == [in_sample(i, 0.1) for i in ids]  # every replica decides the same
    assert 0.09 < sum(picked) / len(ids) < 0.11
    assert all(0.0 <= hash_unit(i) < 1.0 for i in ids[:100])


def test_sample_is_monotone_in_rate() -> None:
    ids = [f"c{i}" for i in range(2000)]
    assert {i for i in ids if in_sample(i, 0.05)} <= {i for i in ids if in_sample(i, 0.2)}


def test_budget_exhaustion_stops_judging_but_not_counting() -> None:
    cid = next(f"c{i}" for i in range(100) if in_sample(f"c{i}", 0.5))
    assert route(cid, rate=0.5, judge_accepting=True).judge
    decision = route(cid, rate=0.5, judge_accepting=False)
    assert not decision.judge and decision.reason == "budget_exhausted"
    assert route(cid, rate=0.5, judge_accepting=True).sample_weight == 2.0
