"""The judge's daily spend budget, in US dollars, reset at midnight UTC.

Each call reserves its worst-case cost before it is sent (prompt estimate + max output tokens at
the configured prices) and settles the actual cost from the reported usage afterwards, so
concurrent calls cannot overshoot the limit. Once the next call no longer fits, ``accepting()`` is
False: the router stops sending conversations to the judge (metric
``convmon_judge_budget_exhausted`` = 1 and one warning per day) instead of failing them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, date, datetime

from monitor.contracts.errors import BudgetExhausted
from monitor.contracts.metrics import Metrics

log = logging.getLogger(__name__)


def utc_today() -> date:
    return datetime.now(UTC).date()


class DailyBudget:
    def __init__(
        self, limit_usd: float, *, metrics: Metrics | None = None, today: Callable[[], date] = utc_today
    ) -> None:
        self.limit_usd = limit_usd
        self._metrics = metrics
        self._today = today
        self._day = today()
        self.spent_usd = 0.0
        self.reserved_usd = 0.0
        self._typical = 0.0  # the last reservation: what the next call will probably need
        self._warned = False
        self._publish()

    @property
    def remaining_usd(self) -> float:
        self._rollover()
        return max(0.0, self.limit_usd - self.spent_usd - self.reserved_usd)

    def accepting(self) -> bool:
        """False once today's budget cannot cover another call like the last one."""
        self._rollover()
        ok = self.spent_usd + self.reserved_usd + self._typical <= self.limit_usd and self.spent_usd < self.limit_usd
        if not ok:
            self._exhausted()
        return ok

    def reserve(self, usd: float) -> None:
        """Hold ``usd`` for a call about to be sent; raise ``BudgetExhausted`` when it does not fit."""
        self._rollover()
        self._typical = usd
        if self.spent_usd + self.reserved_usd + usd > self.limit_usd:
            self._exhausted()
            raise BudgetExhausted(
                f"the judge's daily budget of ${self.limit_usd:.2f} is spent (${self.spent_usd:.4f} used, "
                f"${self.reserved_usd:.4f} in flight, next call needs up to ${usd:.4f}); it resets at 00:00 UTC "
                "(CONVMON_JUDGE_DAILY_BUDGET_USD)"
            )
        self.reserved_usd += usd
        self._publish()

    def settle(self, reserved: float, actual: float) -> None:
        """Replace a reservation by the call's actual cost (0 when the call failed before billing)."""
        self.reserved_usd = max(0.0, self.reserved_usd - reserved)
        self.spent_usd += actual
        self._publish()
        if self.spent_usd + self._typical > self.limit_usd:
            self._exhausted()

    def _rollover(self) -> None:
        today = self._today()
        if today != self._day:
            log.info("judge budget: new day %s, $%.4f was spent on %s", today, self.spent_usd, self._day)
            self._day, self.spent_usd, self._warned = today, 0.0, False
            self._publish()

    def _exhausted(self) -> None:
        if self._metrics is not None:
            self._metrics.judge_budget_exhausted.set(1)
        if not self._warned:
            self._warned = True
            log.warning(
                "judge daily budget of $%.2f is spent ($%.4f used); the judge stops accepting conversations "
                "until 00:00 UTC",
                self.limit_usd,
                self.spent_usd,
            )

    def _publish(self) -> None:
        if self._metrics is None:
            return
        self._metrics.judge_budget_remaining.set(max(0.0, self.limit_usd - self.spent_usd))
        if not self._warned:
            self._metrics.judge_budget_exhausted.set(0)
