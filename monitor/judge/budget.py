"""The judge's daily spend budget, in US dollars, per UTC day, shared by every worker.

Each HTTP attempt reserves its worst-case cost *before* it is sent, atomically in the ledger
(:mod:`monitor.judge.ledger`: the label store's database, so N workers share one budget and a
restart forgets nothing). The bound is computed locally (prompt bytes, plus ``max_tokens``, at
the model's price); afterwards the server's reported usage may lower the booking, never raise it.
Once the next call no longer fits, ``accepting()`` is False: the router stops sending
conversations to the judge (``convmon_judge_budget_exhausted`` = 1 and one warning per day). "The
next call" is sized like the latest reservation any worker asked for, as the ledger records it, so
a worker that has not made a call of its own (restarted, scaled out) agrees with the others from
its first ledger read, before it routes anything.

``accepting()`` runs on the hot path, so it reads a cached total, refreshed from the ledger in
the background every ``refresh_s`` and by every reservation. While the ledger is unreachable a
reservation waits and retries with backoff (``convmon_judge_budget_store_errors_total``): the
judge stage stalls and Kafka keeps its input, rather than spend without a ledger.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TypeVar

from monitor.contracts.errors import BudgetExhausted, StoreError
from monitor.contracts.metrics import Metrics
from monitor.judge.ledger import BudgetLedger, LedgerDay, MemoryLedger

log = logging.getLogger(__name__)
_RELEASE_TRIES = 3
T = TypeVar("T")


def utc_today() -> date:
    return datetime.now(UTC).date()


@dataclass(frozen=True)
class Reservation:
    day: str
    usd: float


class DailyBudget:
    def __init__(
        self, limit_usd: float, *, ledger: BudgetLedger | None = None, metrics: Metrics | None = None,
        today: Callable[[], date] = utc_today, refresh_s: float = 5.0, max_backoff_s: float = 30.0,
    ) -> None:
        self.limit_usd = limit_usd
        self.ledger: BudgetLedger = ledger if ledger is not None else MemoryLedger()
        self._metrics = metrics
        self._today = today
        self.refresh_s = refresh_s
        self.max_backoff_s = max_backoff_s
        self._day = today().isoformat()
        self._spent = 0.0  # the ledger's total for _day, as last seen (every worker's bookings)
        self._seen_at = float("-inf")
        self._refreshing = False
        self._typical = 0.0  # the latest reservation (this worker's or the ledger's): what the next call needs
        self._warned = False

    @property
    def spent_usd(self) -> float:
        """Today's cluster-wide booking as last seen (settled calls plus calls in flight)."""
        self._rollover()
        return self._spent

    @property
    def remaining_usd(self) -> float:
        return max(0.0, self.limit_usd - self.spent_usd)

    def accepting(self) -> bool:
        """False once today's budget cannot cover another call like the last one (cached, never blocks)."""
        self._rollover()
        if time.monotonic() - self._seen_at > self.refresh_s:
            self._refresh_soon()
        ok = self._fits()
        if not ok:
            self._exhausted()
        return ok

    def _fits(self) -> bool:
        return self._spent + self._typical <= self.limit_usd and self._spent < self.limit_usd

    def on_pace(self, now: datetime | None = None) -> bool:
        """Whether today's booking is within the elapsed share of the UTC day times the limit.

        The router's boosts (uncertainty, feedback) pause while spend runs ahead of the day, so a
        burst of uncertain traffic cannot exhaust the budget by noon and starve the hash slice.
        """
        self._rollover()
        now = now or datetime.now(UTC)
        elapsed = (now.hour * 3600 + now.minute * 60 + now.second) / 86400.0
        return self._spent <= self.limit_usd * elapsed

    async def reserve(self, usd: float) -> Reservation:
        """Book ``usd`` for an attempt about to be sent; raise ``BudgetExhausted`` when it does not fit."""
        self._rollover()
        self._typical = usd
        day = self._day
        total = await self._ledger_call(lambda: self.ledger.reserve(day, usd, self.limit_usd), retry=True)
        if total is None:
            self._see(day, await self._ledger_call(lambda: self.ledger.state(day), retry=True))
            self._exhausted()
            raise BudgetExhausted(
                f"the judge's daily budget of ${self.limit_usd:.2f} is spent (${self._spent:.4f} booked across "
                f"workers, next call needs up to ${usd:.4f}); it resets at 00:00 UTC (CONVMON_JUDGE_DAILY_BUDGET_USD)"
            )
        self._see(day, LedgerDay(total, usd))
        return Reservation(day, usd)

    async def settle(self, reservation: Reservation, actual_usd: float) -> float:
        """Lower a reservation to the attempt's cost, capped at the reservation; returns what stays booked."""
        booked = min(max(actual_usd, 0.0), reservation.usd)
        refund = reservation.usd - booked
        if refund > 0:
            try:
                total = await self._ledger_call(lambda: self.ledger.release(reservation.day, refund), retry=False)
                self._see(reservation.day, LedgerDay(total, 0.0))
            except StoreError as exc:  # keep the whole reservation booked: over-counting is the safe side
                log.warning("judge budget: could not release $%.6f (kept booked): %s", refund, exc)
                booked = reservation.usd
        if self._metrics is not None:
            self._metrics.judge_budget_booked.inc(booked)
        if not self._fits():
            self._exhausted()
        return booked

    async def _ledger_call(self, work: Callable[[], T], *, retry: bool) -> T:
        loop = asyncio.get_running_loop()
        backoff, tries = 0.5, 0
        while True:
            try:
                return await loop.run_in_executor(None, work)
            except StoreError as exc:
                tries += 1
                if self._metrics is not None:
                    self._metrics.judge_budget_store_errors.inc()
                if not retry and tries >= _RELEASE_TRIES:
                    raise
                log.warning("judge budget ledger unreachable, judging waits (retry in %.1fs): %s", backoff, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)

    def _refresh_soon(self) -> None:
        if self._refreshing:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._refreshing = True
        day = self._day

        def done(future: asyncio.Future[LedgerDay]) -> None:
            self._refreshing = False
            if future.exception() is None:
                self._see(day, future.result())
            else:  # next accepting() tries again; reservations surface the error
                self._seen_at = time.monotonic()
                if self._metrics is not None:
                    self._metrics.judge_budget_store_errors.inc()

        loop.run_in_executor(None, self.ledger.state, day).add_done_callback(done)

    def _see(self, day: str, state: LedgerDay) -> None:
        """Take the ledger's word; a ``last_call_usd`` of 0 (a release, an empty day) keeps the size known."""
        if day != self._day:
            return
        self._spent, self._seen_at = state.spent_usd, time.monotonic()
        if state.last_call_usd > 0:
            self._typical = state.last_call_usd
        self._publish()
        if not self._fits():  # the gauge says so as soon as the ledger does, not at the next routing decision
            self._exhausted()

    def _rollover(self) -> None:
        today = self._today().isoformat()
        if today != self._day:
            log.info("judge budget: new UTC day %s, $%.4f was booked on %s", today, self._spent, self._day)
            self._day, self._spent, self._warned, self._seen_at = today, 0.0, False, float("-inf")
            self._publish()

    def _exhausted(self) -> None:
        if self._metrics is not None:
            self._metrics.judge_budget_exhausted.set(1)
        if not self._warned:
            self._warned = True
            log.warning(
                "judge daily budget of $%.2f is spent ($%.4f booked across workers); the judge stops accepting "
                "conversations until 00:00 UTC", self.limit_usd, self._spent,
            )

    def _publish(self) -> None:
        if self._metrics is None:
            return
        self._metrics.judge_budget_spent.set(self._spent)
        self._metrics.judge_budget_remaining.set(max(0.0, self.limit_usd - self._spent))
        if not self._warned:
            self._metrics.judge_budget_exhausted.set(0)
