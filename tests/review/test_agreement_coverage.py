"""On 1,000 simulated review samples, drawn by the review queue's design, the 95 % intervals of agreement,
kappa, precision, recall and the human-corrected rate hold the population's true value in 93-97 % of them."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stages.human_agreement import STATS, agreement_stats, corrected_rate
from monitor.stages.review_queue import review_probability

N, SAMPLES = 6000, 1000


def population(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Judged conversations: a person's truth, the judge's verdict (recall 0.85, 8 % false alarms) and the judge
    slice's weight 1 / pi_judge (a tenth was boosted to pi_judge = 1, the rest judged at the hash rate 0.2)."""
    human = (rng.random(N) < 0.2).astype(float)
    judge = np.where(human == 1, rng.random(N) < 0.85, rng.random(N) < 0.08).astype(float)
    weight = np.where(rng.random(N) < 0.1, 1.0, 5.0)
    return human, judge, weight


def truth(human: np.ndarray, judge: np.ndarray, weight: np.ndarray) -> dict[str, float]:
    full = agreement_stats(judge, human, np.ones(N), weight)
    values = {name: float(full[name].value) for name in STATS}  # type: ignore[arg-type]
    values["corrected_rate"] = float((weight * human).sum() / weight.sum())
    return values


def test_the_intervals_hold_the_truth_in_93_to_97_percent() -> None:
    rng = np.random.default_rng(49)
    human, judge, weight = population(rng)
    true = truth(human, judge, weight)
    flagged = judge == 1
    pi = np.array([review_probability(bool(f), budget_per_day=300, flagged_per_day=float(flagged.sum()),
                                      unflagged_rate=0.15) for f in flagged])
    held = dict.fromkeys(true, 0)
    for _ in range(SAMPLES):
        chosen = rng.random(N) < pi
        stats = agreement_stats(judge[chosen], human[chosen], pi[chosen], weight[chosen])
        stats["corrected_rate"] = corrected_rate(float((weight * judge).sum()), float(weight.sum()), judge[chosen],
                                                 human[chosen], pi[chosen], weight[chosen])
        for name, estimate in stats.items():
            assert estimate.low is not None and estimate.high is not None
            held[name] += estimate.low <= true[name] <= estimate.high
    coverage = {name: count / SAMPLES for name, count in held.items()}
    print("coverage", coverage, "mean reviewed", float(pi.sum()))
    assert all(0.93 <= c <= 0.97 for c in coverage.values()), coverage


def test_with_every_conversation_reviewed_the_estimates_are_exact_and_the_intervals_closed() -> None:
    judge, human = np.array([1, 1, 0, 0, 1]), np.array([1, 0, 0, 1, 1])
    stats = agreement_stats(judge, human, np.ones(5))
    assert stats["agreement"].value == pytest.approx(0.6) and stats["agreement"].low == stats["agreement"].high
    assert stats["precision"].value == pytest.approx(2 / 3) and stats["recall"].value == pytest.approx(2 / 3)
    assert stats["kappa"].value == pytest.approx((0.6 - 0.52) / 0.48)


def test_no_reviewed_positive_leaves_recall_undefined_and_bad_input_is_refused() -> None:
    stats = agreement_stats([0, 0], [0, 0], [0.5, 0.5])
    assert stats["recall"].value is None and stats["agreement"].value == 1.0
    with pytest.raises(ValueError, match="inclusion probabilities must be in"):
        agreement_stats([1], [1], [0.0])
    with pytest.raises(ValueError, match="one entry per reviewed conversation"):
        agreement_stats([1, 0], [1], [1.0, 1.0])


def test_doctests() -> None:
    import doctest

    from monitor.stages import human_agreement, review_queue

    for module in (human_agreement, review_queue):
        assert doctest.testmod(module).failed == 0
