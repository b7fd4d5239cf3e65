"""``SqlLedger``: the judge's budget ledger (:mod:`monitor.judge.ledger`) in the label store's database.

A module of its own so that SQLAlchemy (a sixth of a second of CPU) is imported where a ledger is built
(:func:`monitor.judge.build.build_judge`), not with the worker (tests/cli/test_fast_start.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError

from monitor.contracts.errors import StoreError
from monitor.judge.ledger import LedgerDay

T = TypeVar("T")


def run_sql(engine: sa.Engine, work: Callable[[sa.Connection], T], *, create: Callable[[], None] | None,
            what: str) -> T:
    """``work`` in one transaction (after ``create``, the table's first use); a database error is a StoreError
    whose one line says ``what`` could not be done."""
    try:
        if create is not None:
            create()
        with engine.begin() as conn:
            return work(conn)
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:200]
        raise StoreError(f"{what}: {first}") from exc


def create_table(engine: sa.Engine, metadata: sa.MetaData, table: sa.Table) -> None:
    """Create ``metadata``'s tables; another worker creating ``table`` at the same moment is not an error."""
    try:
        with engine.begin() as conn:
            metadata.create_all(conn)
    except SQLAlchemyError:
        if not sa.inspect(engine).has_table(table.name):
            raise


class SqlLedger:
    """The ledger in a SQLAlchemy database (sqlite or postgresql URL; the label store's by default)."""

    def __init__(self, url: str, *, table_prefix: str = "convmon_") -> None:
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        try:
            parsed = sa.engine.make_url(url)
            self.shown = parsed.render_as_string(hide_password=True)
            self.engine = sa.create_engine(parsed, pool_pre_ping=True, hide_parameters=True)
        except (SQLAlchemyError, ValueError, ImportError) as exc:
            raise StoreError(f"judge budget ledger: cannot open {url.split('@')[-1]!r}: {exc}") from exc
        self.metadata = sa.MetaData()
        self.table = sa.Table(
            f"{table_prefix}judge_budget", self.metadata,
            sa.Column("day", sa.String(10), primary_key=True),  # YYYY-MM-DD, UTC
            sa.Column("spent_usd", sa.Float, nullable=False),
            sa.Column("updated_at", sa.Float, nullable=False),
            sa.Column("last_call_usd", sa.Float, nullable=False, server_default="0"),
        )
        self._created = False
        self._create_lock = threading.Lock()
        self._insert = sqlite.insert if self.engine.dialect.name == "sqlite" else postgresql.insert

    def transact(self, work: Callable[[sa.Connection], T], what: str) -> T:
        return run_sql(self.engine, work, create=None if self._created else self._create,
                       what=f"judge budget ledger {self.shown!r}: cannot {what}")

    def _create(self) -> None:
        """Create the table once; another worker creating it at the same moment is not an error."""
        with self._create_lock:
            if self._created:
                return
            create_table(self.engine, self.metadata, self.table)
            self._add_last_call_column()
            self._created = True

    def _add_last_call_column(self) -> None:
        """A table from before ``last_call_usd`` gets the column (a concurrent worker adding it is fine)."""
        def present() -> bool:
            return "last_call_usd" in {c["name"] for c in sa.inspect(self.engine).get_columns(self.table.name)}

        if present():
            return
        try:
            with self.engine.begin() as conn:
                name = self.engine.dialect.identifier_preparer.quote(self.table.name)
                conn.execute(sa.text(f"ALTER TABLE {name} ADD COLUMN last_call_usd FLOAT NOT NULL DEFAULT 0"))
        except SQLAlchemyError:
            if not present():
                raise

    def reserve(self, day: str, usd: float, limit_usd: float) -> float | None:
        t = self.table

        def work(conn: sa.Connection) -> float | None:
            now = time.time()
            conn.execute(self._insert(t).values(day=day, spent_usd=0.0, updated_at=now, last_call_usd=0.0)
                         .on_conflict_do_nothing(index_elements=["day"]))
            row = conn.execute(
                sa.update(t).where(t.c.day == day, t.c.spent_usd + usd <= limit_usd)
                .values(spent_usd=t.c.spent_usd + usd, updated_at=now, last_call_usd=usd).returning(t.c.spent_usd)
            ).first()
            if row is None:  # refused: other workers learn from the row that a call this size no longer fits
                conn.execute(sa.update(t).where(t.c.day == day).values(last_call_usd=usd))
            return None if row is None else float(row[0])

        return self.transact(work, "reserve")

    def release(self, day: str, usd: float) -> float:
        t = self.table

        def work(conn: sa.Connection) -> float:
            row = conn.execute(
                sa.update(t).where(t.c.day == day)
                .values(spent_usd=sa.func.greatest(t.c.spent_usd - usd, 0.0) if self.engine.dialect.name
                        == "postgresql" else sa.func.max(t.c.spent_usd - usd, 0.0), updated_at=time.time())
                .returning(t.c.spent_usd)
            ).first()
            return 0.0 if row is None else float(row[0])

        return self.transact(work, "release")

    def spent(self, day: str) -> float:
        return self.state(day).spent_usd

    def state(self, day: str) -> LedgerDay:
        t = self.table
        row = self.transact(lambda conn: conn.execute(sa.select(t.c.spent_usd, t.c.last_call_usd)
                                                  .where(t.c.day == day)).first(), "read")
        return LedgerDay(0.0, 0.0) if row is None else LedgerDay(float(row[0] or 0.0), float(row[1] or 0.0))

    def drop(self) -> None:
        self.transact(lambda conn: self.metadata.drop_all(conn), "drop")

    def close(self) -> None:
        self.engine.dispose()
