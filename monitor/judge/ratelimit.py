"""Token buckets for the judge's requests-per-minute and tokens-per-minute limits.

Providers enforce both; staying under them client-side turns most 429s into a short local wait.
Token use is only known after the call, so a request takes its estimate up front and the
difference is settled afterwards (the bucket may go negative, which delays the next callers).

>>> import asyncio
>>> bucket = TokenBucket(per_minute=60)   # one per second, burst of 60
>>> asyncio.run(bucket.acquire(60))
0.0
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class TokenBucket:
    """Continuous-refill bucket: ``per_minute`` tokens a minute, holding at most ``capacity``.

    ``acquire`` waits (FIFO, via a lock) until the amount is available and returns the seconds
    waited; amounts above the capacity are capped so a huge request cannot block forever.
    """

    def __init__(
        self,
        *,
        per_minute: float,
        capacity: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if per_minute <= 0:
            raise ValueError(f"The 'per_minute' parameter of TokenBucket must be > 0. Got {per_minute} instead.")
        self.per_minute = per_minute
        self.capacity = capacity if capacity is not None else per_minute
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.capacity
        self._stamp = clock()
        self._lock = asyncio.Lock()

    @property
    def available(self) -> float:
        self._refill()
        return self._tokens

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.per_minute / 60.0)
        self._stamp = now

    async def acquire(self, amount: float = 1.0) -> float:
        amount = min(amount, self.capacity)
        waited = 0.0
        async with self._lock:
            while True:
                self._refill()
                if self._tokens >= amount:
                    self._tokens -= amount
                    return waited
                delay = (amount - self._tokens) * 60.0 / self.per_minute
                waited += delay
                await self._sleep(delay)

    def settle(self, delta: float) -> None:
        """Debit (positive) or credit (negative) the difference between actual use and the estimate."""
        self._refill()
        self._tokens = max(-self.capacity, min(self.capacity, self._tokens - delta))


class RateLimiter:
    """Both provider limits at once: one request and ``tokens`` estimated tokens per call."""

    def __init__(
        self,
        *,
        requests_per_minute: float,
        tokens_per_minute: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.requests = TokenBucket(per_minute=requests_per_minute, clock=clock, sleep=sleep)
        self.tokens = TokenBucket(per_minute=tokens_per_minute, clock=clock, sleep=sleep)

    async def acquire(self, tokens: int) -> float:
        """Wait for a request slot and ``tokens`` tokens; returns the seconds waited."""
        return await self.requests.acquire(1) + await self.tokens.acquire(tokens)

    def settle(self, estimated: int, actual: int) -> None:
        self.tokens.settle(actual - estimated)
