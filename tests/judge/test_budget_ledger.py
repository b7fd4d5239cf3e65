"""The cluster-wide judge budget: atomic reservations (SQLite, PostgreSQL), shared by workers, kept on restart."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from monitor.contracts.errors import BudgetExhausted
from monitor.contracts.metrics import Metrics
from monitor.judge.budget import DailyBudget
from monitor.judge.ledger import LedgerDay
from monitor.judge.sql_ledger import SqlLedger
from tests.support.judge_wiring import sample

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(params=["sqlite", "postgresql"])
def url_and_prefix(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    prefix = f"b{uuid.uuid4().hex[:8]}_"
    url = f"sqlite:///{tmp_path / 'labels.db'}" if request.param == "sqlite" else PG
    yield url, prefix
    ledger = SqlLedger(url, table_prefix=prefix)
    ledger.drop()
    ledger.close()


def test_concurrent_reservations_from_two_workers_never_exceed_the_limit(url_and_prefix: tuple[str, str]) -> None:
    """Two ledgers (two workers' connections) race for 100 reservations of $0.03 against $1: exactly 33 fit."""
    url, prefix = url_and_prefix
    workers = [SqlLedger(url, table_prefix=prefix), SqlLedger(url, table_prefix=prefix)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: workers[i % 2].reserve("2030-01-01", 0.03, 1.0), range(100)))
    granted = [r for r in results if r is not None]
    assert len(granted) == 33
    assert workers[0].spent("2030-01-01") == pytest.approx(0.99)
    assert workers[1].release("2030-01-01", 0.09) == pytest.approx(0.90)
    assert workers[0].spent("2030-01-02") == 0.0  # a new UTC day is a new row
    for w in workers:
        w.close()


def test_the_budget_is_shared_by_workers_and_survives_a_restart(url_and_prefix: tuple[str, str]) -> None:
    url, prefix = url_and_prefix
    today = lambda: date(2030, 1, 1)  # noqa: E731
    metrics = [Metrics(CollectorRegistry()) for _ in range(3)]

    async def run() -> None:
        a = DailyBudget(1.0, ledger=SqlLedger(url, table_prefix=prefix), metrics=metrics[0], today=today)
        b = DailyBudget(1.0, ledger=SqlLedger(url, table_prefix=prefix), metrics=metrics[1], today=today)
        await a.settle(await a.reserve(0.5), 0.4)  # usage lowered the booking to 0.4
        await b.settle(await b.reserve(0.5), 0.5)
        assert b.spent_usd == pytest.approx(0.9)
        with pytest.raises(BudgetExhausted, match="booked across workers"):
            await a.reserve(0.2)
        assert not a.accepting() and sample(metrics[0], "convmon_judge_budget_exhausted") == 1
        restarted = DailyBudget(1.0, ledger=SqlLedger(url, table_prefix=prefix), metrics=metrics[2], today=today)
        assert restarted.accepting()  # nothing read yet: the first call refreshes in the background...
        for _ in range(100):  # ...a connection away (a first PostgreSQL connect took over 0.3 s under load)...
            if not restarted.accepting():
                break
            await asyncio.sleep(0.1)
        # ...and the ledger's row says a $0.20 call no longer fits: no call of its own needed to know it
        assert not restarted.accepting() and sample(metrics[2], "convmon_judge_budget_exhausted") == 1
        with pytest.raises(BudgetExhausted):
            await restarted.reserve(0.2)  # and a reservation asks the ledger itself
        assert sample(metrics[2], "convmon_judge_budget_spent_usd") == pytest.approx(0.9)
        assert sample(metrics[0], "convmon_judge_budget_booked_usd_total") == pytest.approx(0.4)
        assert sample(metrics[1], "convmon_judge_budget_booked_usd_total") == pytest.approx(0.5)

    asyncio.run(run())


def test_a_table_from_before_last_call_usd_gets_the_column(url_and_prefix: tuple[str, str]) -> None:
    """Deployments created the table without ``last_call_usd``: the ledger adds it and keeps the day's booking."""
    url, prefix = url_and_prefix
    old = sa.create_engine(url)
    with old.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {prefix}judge_budget (day VARCHAR(10) PRIMARY KEY, "
                             "spent_usd FLOAT NOT NULL, updated_at FLOAT NOT NULL)"))
        conn.execute(sa.text(f"INSERT INTO {prefix}judge_budget VALUES ('2030-01-01', 0.7, 0)"))
    old.dispose()
    ledger = SqlLedger(url, table_prefix=prefix)
    assert ledger.state("2030-01-01") == LedgerDay(pytest.approx(0.7), 0.0)
    assert ledger.reserve("2030-01-01", 0.4, 1.0) is None  # refused, and the size is recorded for the others
    assert SqlLedger(url, table_prefix=prefix).state("2030-01-01") == LedgerDay(pytest.approx(0.7), 0.4)
    assert ledger.reserve("2030-01-01", 0.2, 1.0) == pytest.approx(0.9)
    assert ledger.state("2030-01-01").last_call_usd == 0.2
    ledger.close()
