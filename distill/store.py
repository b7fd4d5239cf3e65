"""Label store: the judge's labelled conversations, for retraining the distilled models.

SQLAlchemy 2 Core, one table ``<prefix>labels``: SQLite file by default, PostgreSQL by URL.
One row per (conversation id, rubric set, rubric version, judge) — a replayed or re-judged
conversation *updates* its row (``INSERT ... ON CONFLICT DO UPDATE`` on both dialects) instead
of duplicating it, so the faust label sink may deliver at least once. Conversation text passes
through ``redact`` before it is written: the store never holds what the redactor removed, and
free text is sanitised for the database (NUL, which PostgreSQL text refuses, becomes U+FFFD).
Key fields are stored as given: a key the database refuses raises :class:`LabelRejected`, which
the label sink dead-letters alone (a changed key would no longer match ``forget``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError

from distill.label_record import LabelRecord, Redact, no_redaction
from monitor.contracts.errors import LabelRejected, StoreError
from monitor.contracts.events import Conversation
from monitor.contracts.scores import ScoreRecord
from monitor.contracts.sections import DistillSettings

log = logging.getLogger(__name__)
KEY = ("conversation_id", "rubric_set", "rubric_version", "judge")
DAY_S = 86_400.0
# The database refused the data, not the connection: retrying the same row cannot help.
_DATA_ERRORS = (sa.exc.DataError, sa.exc.IntegrityError)


def sanitise(value: Any) -> Any:
    """Strings (nested in JSON values too) without NUL, which PostgreSQL text and jsonb refuse."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {sanitise(k): sanitise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [sanitise(v) for v in value]
    return value


def _added_columns() -> list[sa.Column[Any]]:
    """Columns added after the table's first release: added to an existing table on start-up."""
    return [sa.Column("inclusion_probability", sa.Float), sa.Column("sampled_by", sa.String(16))]


def add_missing_columns(conn: sa.Connection, table: sa.Table, columns: Iterable[sa.Column[Any]]) -> None:
    """A table created by an older release lacks the columns added since (nullable, so old rows stay valid)."""
    present = {c["name"] for c in sa.inspect(conn).get_columns(table.name)}
    for column in columns:
        if column.name not in present:
            kind = column.type.compile(dialect=conn.dialect)
            conn.execute(sa.text(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}'))


def _table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    return sa.Table(
        f"{prefix}labels", metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("rubric_set", sa.String(128), nullable=False),
        sa.Column("rubric_version", sa.String(64), nullable=False),
        sa.Column("judge", sa.String(128), nullable=False),
        sa.Column("model_version", sa.String(128), nullable=False, default=""),
        sa.Column("turns", sa.JSON, nullable=False),
        sa.Column("items", sa.JSON, nullable=False),
        sa.Column("r", sa.Float, nullable=False),
        sa.Column("thumbs", sa.String(8)),
        sa.Column("csat", sa.Integer),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("labelled_at", sa.Float, nullable=False, index=True),
        sa.Column("ended_at", sa.Float),
        sa.Column("updated_at", sa.Float, nullable=False),
        *_added_columns(),
        sa.UniqueConstraint(*KEY, name=f"{prefix}labels_key"),
    )


class LabelStore:
    """Read and write labelled conversations; ``url`` is any SQLAlchemy URL (sqlite, postgresql+psycopg)."""

    def __init__(
        self, url: str, *, table_prefix: str = "convmon_", redact: Redact = no_redaction,
        retention_days: int | None = None,
    ) -> None:
        self.url = url
        self.redact = redact
        self.retention_days = retention_days
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        try:
            parsed = sa.engine.make_url(url)
        except (SQLAlchemyError, ValueError) as exc:
            raise StoreError(f"label store URL is not a SQLAlchemy URL: {exc}") from exc
        shown = parsed.render_as_string(hide_password=True)
        try:
            backend = parsed.get_backend_name()
            if backend not in ("sqlite", "postgresql"):
                raise StoreError(f"label store supports sqlite and postgresql URLs; got {backend!r} in {shown!r}")
            # hide_parameters: SQL errors would otherwise quote bound values, i.e. conversation text.
            self.engine = sa.create_engine(parsed, pool_pre_ping=True, hide_parameters=True)
        except (SQLAlchemyError, ImportError) as exc:
            raise StoreError(f"cannot open label store {shown!r}: {exc}") from exc
        self.metadata = sa.MetaData()
        self.table = _table(self.metadata, table_prefix)
        self._created = False
        try:  # a store that is down at start-up must not stop a worker: create the table on first use
            self._ensure_table()
        except StoreError as exc:
            log.warning("label store not reachable yet; will retry on first write: %s", " ".join(str(exc).split()))

    def _ensure_table(self) -> None:
        if not self._created:
            self.transact(lambda conn: self.metadata.create_all(conn), "create the labels table", ensure=False)
            self.transact(self._add_columns, "add new columns to the labels table", ensure=False)
            self._created = True

    def _add_columns(self, conn: sa.Connection) -> None:
        add_missing_columns(conn, self.table, _added_columns())

    @classmethod
    def from_settings(cls, settings: DistillSettings, *, redact: Redact = no_redaction) -> LabelStore:
        return cls(settings.label_store_url, redact=redact, retention_days=settings.label_retention_days)

    def transact(self, work: Callable[[sa.Connection], Any], what: str, *, ensure: bool = True) -> Any:
        if ensure:
            self._ensure_table()
        try:
            with self.engine.begin() as conn:
                return work(conn)
        except _DATA_ERRORS as exc:
            raise LabelRejected(f"the database refused the data: {_reason(exc)}") from exc
        except sa.exc.StatementError as exc:
            if exc.orig is not None and not isinstance(exc, sa.exc.DBAPIError):  # a value no driver can send
                raise LabelRejected(f"the database refused the data: {_reason(exc)}") from exc
            raise StoreError(f"label store {self.engine.url.render_as_string()!r}: cannot {what}: {exc}") from exc
        except SQLAlchemyError as exc:
            raise StoreError(f"label store {self.engine.url.render_as_string()!r}: cannot {what}: {exc}") from exc

    def _row(self, record: LabelRecord, now: float) -> dict[str, Any]:
        return {
            "conversation_id": record.conversation_id, "rubric_set": record.rubric_set,
            "rubric_version": record.rubric_version, "judge": record.judge,
            "model_version": sanitise(record.model_version),
            "turns": sanitise([t.model_dump(mode="json", exclude_none=True) for t in record.turns]),
            "items": sanitise([i.model_dump(mode="json", exclude_none=True) for i in record.items]),
            "r": record.R, "thumbs": sanitise(record.thumbs), "csat": record.csat,
            "metadata": sanitise(record.metadata),
            "labelled_at": record.labelled_at, "ended_at": record.ended_at, "updated_at": now,
            "inclusion_probability": record.inclusion_probability, "sampled_by": record.sampled_by,
        }

    def upsert(self, records: Iterable[LabelRecord | tuple[Conversation, ScoreRecord]]) -> int:
        """Insert or update labels (keyed by conversation, rubric set, version, judge); returns rows written.

        Pairs are converted with :meth:`LabelRecord.from_score` and redacted; a ready LabelRecord
        is stored as given (its producer redacted it). Within one call the last record per key wins.
        """
        now = time.time()
        rows: dict[tuple[str, ...], dict[str, Any]] = {}
        for record in records:
            if isinstance(record, tuple):
                record = LabelRecord.from_score(*record, redact=self.redact)
            row = self._row(record, now)
            rows[tuple(row[k] for k in KEY)] = row
        if not rows:
            return 0
        insert = (sqlite.insert if self.engine.dialect.name == "sqlite" else postgresql.insert)(self.table)
        updated = [c.name for c in self.table.columns if c.name not in (*KEY, "id")]
        stmt = insert.on_conflict_do_update(index_elements=list(KEY), set_={c: insert.excluded[c] for c in updated})
        self.transact(lambda conn: conn.execute(stmt, list(rows.values())), "upsert labels")
        return len(rows)

    def upsert_raw(self, items: Iterable[dict[str, Any]]) -> int:
        """Upsert decoded label-topic messages ``{"conversation": {...}, "score": {...}}`` (or LabelRecord dicts).

        A message that is not a valid judge label raises :class:`LabelRejected` (the label sink
        isolates and dead-letters it); database failures raise StoreError (the sink retries).
        """
        records: list[LabelRecord] = []
        for item in items:
            try:
                if "score" in item:
                    conversation = Conversation.model_validate(item["conversation"])
                    score = ScoreRecord.model_validate(item["score"])
                    records.append(LabelRecord.from_score(conversation, score, redact=self.redact))
                else:
                    records.append(LabelRecord.model_validate(item))
            except (ValidationError, StoreError, KeyError, TypeError) as exc:
                raise LabelRejected(f"not a judge label: {_first_line(str(exc))}") from exc
        return self.upsert(records)

    def delete_conversations(self, conversation_ids: Iterable[str]) -> int:
        """Erase every label of these conversations (any rubric set, version or judge); returns rows deleted."""
        ids = list(dict.fromkeys(conversation_ids))
        if not ids:
            return 0
        stmt = sa.delete(self.table).where(self.table.c.conversation_id.in_(ids))
        return int(self.transact(lambda conn: conn.execute(stmt).rowcount, "delete conversations"))

    def _where(self, rubric_set: str | None, rubric_version: str | None, judge: str | None,
               since: float | None, until: float | None, with_feedback: bool = False) -> list[Any]:
        t = self.table.c
        clauses = [sa.or_(t.thumbs.is_not(None), t.csat.is_not(None))] if with_feedback else []
        for column, value in ((t.rubric_set, rubric_set), (t.rubric_version, rubric_version), (t.judge, judge)):
            if value is not None:
                clauses.append(column == value)
        if since is not None:
            clauses.append(t.labelled_at >= since)
        if until is not None:
            clauses.append(t.labelled_at < until)
        return clauses

    def fetch(
        self, *, rubric_set: str | None = None, rubric_version: str | None = None, judge: str | None = None,
        since: float | None = None, until: float | None = None, limit: int | None = None,
        with_feedback: bool = False, conversation_id: str | None = None,
    ) -> list[LabelRecord]:
        """Labels matching the filters, newest first (``limit`` keeps the most recent).

        ``with_feedback`` keeps conversations with a thumbs vote or a CSAT answer (calibration targets).
        """
        query = sa.select(self.table).where(*self._where(rubric_set, rubric_version, judge, since, until,
                                                         with_feedback))
        if conversation_id is not None:
            query = query.where(self.table.c.conversation_id == conversation_id)
        query = query.order_by(self.table.c.labelled_at.desc(), self.table.c.id.desc()).limit(limit)
        rows = self.transact(lambda conn: conn.execute(query).mappings().all(), "read labels")
        return [
            LabelRecord(
                conversation_id=r["conversation_id"], rubric_set=r["rubric_set"], rubric_version=r["rubric_version"],
                judge=r["judge"], model_version=r["model_version"], turns=r["turns"], items=r["items"], R=r["r"],
                thumbs=r["thumbs"], csat=r["csat"], metadata=r["metadata"], labelled_at=r["labelled_at"],
                ended_at=r["ended_at"], inclusion_probability=r["inclusion_probability"], sampled_by=r["sampled_by"],
            )
            for r in rows
        ]

    def count(self, *, rubric_set: str | None = None, rubric_version: str | None = None,
              judge: str | None = None, since: float | None = None, with_feedback: bool = False) -> int:
        query = sa.select(sa.func.count()).select_from(self.table)
        query = query.where(*self._where(rubric_set, rubric_version, judge, since, None, with_feedback))
        return int(self.transact(lambda conn: conn.execute(query).scalar_one(), "count labels"))

    def purge(self, *, older_than_days: float | None = None, now: float | None = None) -> int:
        """Delete labels labelled more than N days ago (default: the store's retention); returns rows deleted."""
        days = self.retention_days if older_than_days is None else older_than_days
        if days is None:
            raise StoreError("purge needs older_than_days or a store created with retention_days")
        cutoff = (time.time() if now is None else now) - days * DAY_S
        stmt = sa.delete(self.table).where(self.table.c.labelled_at < cutoff)
        return int(self.transact(lambda conn: conn.execute(stmt).rowcount, "purge labels"))

    def drop(self) -> None:
        """Drop the table (tests and teardown)."""
        self.transact(lambda conn: self.metadata.drop_all(conn), "drop the labels table")

    def close(self) -> None:
        self.engine.dispose()


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "no detail"


def _reason(exc: sa.exc.StatementError) -> str:
    """The database's own message, first line only: no SQL, no bound values (hide_parameters)."""
    return f"{type(exc.orig).__name__}: {_first_line(str(exc.orig))}" if exc.orig is not None else _first_line(str(exc))
