from __future__ import annotations

import asyncio
from datetime import date

import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.errors import BudgetExhausted
from monitor.contracts.metrics import Metrics
from monitor.judge.budget import DailyBudget
from monitor.judge.ledger import MemoryLedger
from monitor.judge.ratelimit import RateLimiter, TokenBucket
from tests.support.judge_wiring import sample


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay


async def test_bucket_allows_a_burst_then_paces() -> None:
    t = FakeTime()
    bucket = TokenBucket(per_minute=60, clock=t.clock, sleep=t.sleep)
    for _ in range(60):
        assert await bucket.acquire() == 0.0
    assert await bucket.acquire() == pytest.approx(1.0)  # one token a second
    assert await bucket.acquire(3) == pytest.approx(3.0)


async def test_bucket_caps_oversized_requests_and_settles_debts() -> None:
    t = FakeTime()
    bucket = TokenBucket(per_minute=600, clock=t.clock, sleep=t.sleep)
    assert await bucket.acquire(10_000) == 0.0  # capped at capacity instead of waiting forever
    bucket.settle(300)  # actual use was 300 tokens above the estimate
    assert bucket.available == pytest.approx(-300)
    assert await bucket.acquire(60) == pytest.approx(36.0)


async def test_limiter_waits_for_both_requests_and_tokens() -> None:
    t = FakeTime()
    limiter = RateLimiter(requests_per_minute=2, tokens_per_minute=1000, clock=t.clock, sleep=t.sleep)
    assert await limiter.acquire(800) == 0.0
    assert await limiter.acquire(800) == pytest.approx(36.0)  # tokens are the binding limit
    limiter.settle(estimated=800, actual=100)  # credit back what was not used
    assert limiter.tokens.available == pytest.approx(700, abs=1)


def test_bucket_rejects_a_zero_rate() -> None:
    with pytest.raises(ValueError, match=r"'per_minute' parameter of TokenBucket must be > 0. Got 0 instead"):
        TokenBucket(per_minute=0)


async def test_budget_reserve_settle_and_daily_reset(metrics) -> None:
    day = [date(2024, 5, 1)]
    budget = DailyBudget(1.0, metrics=metrics, today=lambda: day[0])
    first = await budget.reserve(0.4)
    assert budget.remaining_usd == pytest.approx(0.6)
    assert await budget.settle(first, 0.3) == pytest.approx(0.3)
    assert budget.spent_usd == pytest.approx(0.3)
    assert sample(metrics, "convmon_judge_budget_remaining_usd") == pytest.approx(0.7)
    second = await budget.reserve(0.6)
    assert await budget.settle(second, 5.0) == pytest.approx(0.6)  # never more than the reservation
    assert not budget.accepting()  # $0.10 left cannot cover a call like the last ($0.60)
    assert sample(metrics, "convmon_judge_budget_exhausted") == 1
    with pytest.raises(BudgetExhausted, match=r"next call needs up to \$0.6000\); it resets at 00:00 UTC"):
        await budget.reserve(0.6)
    day[0] = date(2024, 5, 2)
    assert budget.accepting() and budget.spent_usd == 0
    assert sample(metrics, "convmon_judge_budget_exhausted") == 0
    assert budget.ledger.spent("2024-05-01") == pytest.approx(0.9)  # each UTC day has its own row


async def test_a_worker_without_calls_of_its_own_sees_the_shared_budget_exhausted() -> None:
    """A restarted (or new) worker has booked nothing itself; the ledger's latest call size tells it that
    the $0.10 left cannot cover the next call, so it routes nothing and its gauge says exhausted."""
    ledger = MemoryLedger()
    busy_metrics, fresh_metrics = Metrics(CollectorRegistry()), Metrics(CollectorRegistry())
    busy = DailyBudget(1.0, ledger=ledger, metrics=busy_metrics)
    await busy.settle(await busy.reserve(0.45), 0.45)
    await busy.settle(await busy.reserve(0.45), 0.45)
    with pytest.raises(BudgetExhausted):
        await busy.reserve(0.45)
    fresh = DailyBudget(1.0, ledger=ledger, metrics=fresh_metrics)
    fresh.accepting()  # the first routing decision starts a background ledger read
    for _ in range(100):
        await asyncio.sleep(0.01)
        if fresh.spent_usd:
            break
    assert fresh.spent_usd == pytest.approx(0.9)
    assert not fresh.accepting()
    assert sample(fresh_metrics, "convmon_judge_budget_exhausted") == 1


def test_zero_budget_never_accepts(metrics) -> None:
    budget = DailyBudget(0.0, metrics=metrics)
    assert not budget.accepting()
