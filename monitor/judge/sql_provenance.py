"""The last evaluator each judge verdict was stamped with, in the label store's database.

One row per judge name (``<prefix>judge_provenance``), so a restart or a deploy that changes the endpoint,
the prompt templates, the rubric, the mode or convmon's version is compared with what the cluster's previous
verdicts were made by (see :mod:`monitor.judge.provenance`). Read once when a worker stamps its first verdict
and written only when the evaluator changed: never a database call per verdict. Shares the budget ledger's
engine (:class:`monitor.judge.sql_ledger.SqlLedger`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.dialects import postgresql, sqlite

from monitor.contracts.evaluator import Evaluator
from monitor.judge.sql_ledger import create_table, run_sql

T = TypeVar("T")


class SqlProvenance:
    """``last`` / ``remember`` over one small table; errors are :class:`StoreError`."""

    def __init__(self, engine: sa.Engine, *, table_prefix: str = "convmon_") -> None:
        self.engine = engine
        self.metadata = sa.MetaData()
        self.table = sa.Table(
            f"{table_prefix}judge_provenance", self.metadata,
            sa.Column("judge", sa.String(128), primary_key=True),
            sa.Column("evaluator", sa.JSON, nullable=False),
            sa.Column("updated_at", sa.Float, nullable=False),
        )
        self._insert = sqlite.insert if engine.dialect.name == "sqlite" else postgresql.insert
        self._created = False

    def transact(self, work: Callable[[sa.Connection], T], what: str) -> T:
        return run_sql(self.engine, work, create=None if self._created else self._create,
                       what=f"judge provenance: cannot {what}")

    def _create(self) -> None:
        create_table(self.engine, self.metadata, self.table)
        self._created = True

    def last(self, judge: str) -> Evaluator | None:
        """The evaluator recorded for ``judge``; None when there is none or it is not one this release reads."""
        query = sa.select(self.table.c.evaluator).where(self.table.c.judge == judge)
        row = self.transact(lambda conn: conn.execute(query).first(), "read")
        try:
            return None if row is None else Evaluator.model_validate(row[0])
        except ValidationError:
            return None

    def remember(self, judge: str, evaluator: Evaluator) -> None:
        insert = self._insert(self.table).values(judge=judge, evaluator=evaluator.model_dump(),
                                                 updated_at=time.time())
        stmt = insert.on_conflict_do_update(index_elements=["judge"], set_={
            "evaluator": insert.excluded.evaluator, "updated_at": insert.excluded.updated_at})
        self.transact(lambda conn: conn.execute(stmt), "write")
