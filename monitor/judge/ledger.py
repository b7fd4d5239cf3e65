"""Where the judge's daily spend is booked: one row per UTC day, shared by every worker.

``SqlLedger`` keeps it in the label store's database (table ``<prefix>judge_budget``), so the
budget is cluster-wide and survives restarts (it lives in :mod:`monitor.judge.sql_ledger`, imported only
where a ledger is built, so that importing the worker does not import SQLAlchemy). A reservation is one
conditional statement,
``UPDATE ... SET spent = spent + x WHERE day = d AND spent + x <= limit RETURNING spent``, in a
transaction: PostgreSQL serialises concurrent updates of the row (and re-checks the condition),
SQLite takes its write lock for the whole transaction. Two workers can therefore never both
reserve the last dollar. ``MemoryLedger`` is the same contract inside one process (tests, tools).

Each day's row also keeps the size of the latest reservation asked for by any worker, granted or
refused (``last_call_usd``): a worker that has made no call of its own (just restarted, or just
scaled out) reads from it whether the next call still fits, so its router and its
``convmon_judge_budget_exhausted`` gauge follow the cluster's state rather than its own history.
Tables created before that column existed get it on first use (``ALTER TABLE ... ADD COLUMN``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class LedgerDay:
    spent_usd: float  # booked so far: settled calls plus calls in flight
    last_call_usd: float  # the latest reservation any worker asked for (granted or refused); 0 before the first


class BudgetLedger(Protocol):
    def reserve(self, day: str, usd: float, limit_usd: float) -> float | None:
        """Add ``usd`` to ``day`` if the total stays within ``limit_usd``: the new total, else None.
        Either way ``usd`` becomes the day's ``last_call_usd``."""

    def release(self, day: str, usd: float) -> float:
        """Give ``usd`` of a reservation back; returns the new total."""

    def spent(self, day: str) -> float:
        """Booked on ``day`` so far (settled calls plus calls in flight)."""

    def state(self, day: str) -> LedgerDay:
        """The day's booking and the latest reservation size, read together."""


class MemoryLedger:
    def __init__(self) -> None:
        self._days: dict[str, LedgerDay] = {}
        self._lock = threading.Lock()

    def reserve(self, day: str, usd: float, limit_usd: float) -> float | None:
        with self._lock:
            spent = self._days.get(day, LedgerDay(0.0, 0.0)).spent_usd
            granted = spent + usd <= limit_usd
            self._days[day] = LedgerDay(spent + usd if granted else spent, usd)
            return spent + usd if granted else None

    def release(self, day: str, usd: float) -> float:
        with self._lock:
            old = self._days.get(day, LedgerDay(0.0, 0.0))
            self._days[day] = LedgerDay(max(0.0, old.spent_usd - usd), old.last_call_usd)
            return self._days[day].spent_usd

    def spent(self, day: str) -> float:
        return self.state(day).spent_usd

    def state(self, day: str) -> LedgerDay:
        with self._lock:
            return self._days.get(day, LedgerDay(0.0, 0.0))
