"""Score records for drill-down: which conversations an item said "yes" for, in the label store's database.

One row per (conversation, scorer, rubric item) whose verdict was ``yes`` (judge verdicts and distilled
verdicts at the item's threshold), with the score or probability, the model version, the configured
dimensions, the judged call's trace and span ids and the judge's reason (``explanation``, redacted): what
``convmon ui``, the Grafana table of the latest DSAT conversations and ``convmon inspect`` read. "No"
verdicts are the complement and are not stored (a row per item per conversation would be ~20x the volume).
No conversation text here: the text of a judged conversation is its label's (redacted, in the same database).
Written by the score sink (``score_store``) from the scores topic, which carries no reasons, and by the label
sink from the judge's labels, which do (:meth:`ScoreStore.upsert_labels`); at least once: rows are upserted,
and a row from the scores topic keeps the reason a label gave it. Judge rows keep the verdict's evaluator (model
as the endpoint reported it, endpoint, prompt hash, rubric, mode, convmon version) in ``evaluator``. Metadata
values are redacted like the labels'; each row keeps the conversation's opaque reference (the exemplars'
``conversation_ref``) so a reference resolves to its id; rows older than ``score_retention_days`` are purged
with the labels. A conversation re-scored after its user came back (docs/metrics.md, "Revisions") keeps here the rows
of its latest revision (``revision``) per scorer, what the rates count: a later revision replaces the earlier one's
rows, an earlier one arriving late changes nothing here. Every revision, with its number, is kept in the history
beside (``<prefix>score_revisions``, :mod:`distill.score_revisions`) and on the scores topic.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from distill.label_record import Redact, no_redaction
from distill.score_revisions import history, history_table, record_row, superseded_rows, upsert_history
from distill.store import DAY_S, LabelStore, add_missing_columns
from monitor.contracts.errors import LabelRejected
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.score_codec import decode_score
from monitor.contracts.scores import ScoreRecord, verdict_label
from monitor.judge.reference import ConversationRef

KEY = ("conversation_id", "scorer", "item_id")


def _added_columns() -> list[sa.Column[Any]]:
    """Columns added after the table's first release: added to an existing table on first use."""
    return [sa.Column("conversation_ref", sa.String(32), index=False), sa.Column("explanation", sa.Text),
            sa.Column("evaluator", sa.JSON),  # the judge's provenance (judge rows); NULL on older rows
            sa.Column("revision", sa.Integer)]  # the conversation's revision the row is of; NULL (1) on older rows


def score_table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    return sa.Table(
        f"{prefix}score_items", metadata,
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("scorer", sa.String(16), nullable=False),
        sa.Column("item_id", sa.String(128), nullable=False),
        sa.Column("polarity", sa.String(16), nullable=False),
        sa.Column("value", sa.Float),  # judge score 0-10, or probability
        sa.Column("r", sa.Float, nullable=False),
        sa.Column("judge", sa.String(128), nullable=False),
        sa.Column("model_version", sa.String(128), nullable=False),
        sa.Column("rubric", sa.String(200), nullable=False),
        sa.Column("trace_id", sa.String(32)),
        sa.Column("span_id", sa.String(16)),
        sa.Column("response_id", sa.String(128)),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("scored_at", sa.Float, nullable=False, index=True),
        sa.Column("updated_at", sa.Float, nullable=False),
        *_added_columns(),
        sa.PrimaryKeyConstraint(*KEY, name=f"{prefix}score_items_key"),
    )


def rows(record: ScoreRecord, now: float, *, ref: ConversationRef | None = None,
         redact: Redact = no_redaction) -> list[dict[str, Any]]:
    trace_id, _, span_id = (record.span or "").partition("-")
    metadata = {key: redact(value) for key, value in record.metadata.items()}
    reference = ref(record.conversation_id) if ref is not None else None
    out = []
    for item in record.items:
        if verdict_label(record.scorer, item) != "yes":
            continue
        out.append({
            "conversation_id": record.conversation_id, "scorer": record.scorer, "item_id": item.item_id,
            "polarity": item.polarity, "value": item.score if item.score is not None else item.probability,
            "r": record.R, "judge": record.judge, "model_version": record.model_version,
            "rubric": f"{record.rubric_set}@{record.rubric_version}", "trace_id": trace_id or None,
            "span_id": span_id or None, "response_id": record.response_id, "metadata": metadata,
            "scored_at": record.scored_at, "updated_at": now, "conversation_ref": reference,
            "evaluator": record.evaluator.model_dump() if record.evaluator is not None else None,
            "explanation": redact(item.explanation) if item.explanation else None, "revision": record.revision,
        })
    return out


class ScoreStore:
    """The ``<prefix>score_items`` table beside the labels (same URL, same engine rules as the label store)."""

    def __init__(self, labels: LabelStore, rubric: RubricSet, *, table_prefix: str = "convmon_",
                 reference: ConversationRef | None = None, redact: Redact = no_redaction,
                 retention_days: float | None = None) -> None:
        self.labels = labels
        self.rubric = rubric
        self.reference = reference
        self.redact = redact
        self.retention_days = retention_days
        self.metadata = sa.MetaData()
        self.table = score_table(self.metadata, table_prefix)
        self.revisions = history_table(self.metadata, table_prefix)
        self._created = False

    def ensure_table(self) -> None:
        if not self._created:
            self.labels.transact(lambda conn: self.metadata.create_all(conn), "create the score table")
            self.labels.transact(self._add_columns, "add new columns to the score table")
            self._created = True

    def _add_columns(self, conn: sa.Connection) -> None:
        add_missing_columns(conn, self.table, _added_columns())

    def upsert(self, records: Iterable[ScoreRecord]) -> int:
        self.ensure_table()
        now = time.time()
        keyed: dict[tuple[str, ...], dict[str, Any]] = {}
        for record in self._latest(list(records), now):
            for row in rows(record, now, ref=self.reference, redact=self.redact):
                keyed[tuple(row[k] for k in KEY)] = row
        if not keyed:
            return 0
        dialect = sqlite if self.labels.engine.dialect.name == "sqlite" else postgresql
        insert = dialect.insert(self.table)
        updated = [c.name for c in self.table.columns if c.name not in KEY]
        values = {c: insert.excluded[c] for c in updated}
        values["explanation"] = sa.func.coalesce(insert.excluded.explanation, self.table.c.explanation)
        values["evaluator"] = sa.func.coalesce(insert.excluded.evaluator, self.table.c.evaluator)
        newer = insert.excluded.revision >= sa.func.coalesce(self.table.c.revision, 1)
        stmt = insert.on_conflict_do_update(index_elements=list(KEY), set_=values, where=newer)
        self.labels.transact(lambda conn: conn.execute(stmt, list(keyed.values())), "upsert score items")
        return len(keyed)

    def _latest(self, records: list[ScoreRecord], now: float) -> list[ScoreRecord]:
        """``records`` less those of a revision below one kept (or in the batch) for their conversation and
        scorer. A conversation with more than one revision has every record, and the score items a later revision
        supersedes, kept in the history; those items are deleted here (the later revision may not repeat their
        yes verdicts). First scorings (nothing revised) cost one query."""
        ids = sorted({r.conversation_id for r in records})
        if not ids or (all(r.revision == 1 for r in records) and not self._revised(ids)):
            return records
        kept: list[ScoreRecord] = self.labels.transact(lambda conn: self._keep_history(conn, records, ids, now),
                                                       "keep score revisions")
        return kept

    def _keep_history(self, conn: sa.Connection, records: list[ScoreRecord], ids: list[str],
                      now: float) -> list[ScoreRecord]:
        t, h = self.table.c, self.revisions.c
        query = sa.select(t.conversation_id, t.scorer, t.item_id, t.value, t.scored_at, t.model_version,
                          t.conversation_ref, t.revision).where(t.conversation_id.in_(ids))
        items = [dict(r) for r in conn.execute(query).mappings().all()]
        kept = (sa.select(h.conversation_id, h.scorer, sa.func.max(h.revision)).where(h.conversation_id.in_(ids))
                .group_by(h.conversation_id, h.scorer))
        best = {(str(row[0]), str(row[1])): int(row[2]) for row in conn.execute(kept).all()}
        for key, revision in [((i["conversation_id"], i["scorer"]), int(i["revision"] or 1)) for i in items] + [
                ((r.conversation_id, r.scorer), r.revision) for r in records]:
            best[key] = max(best.get(key, 1), revision)
        superseded = [i for i in items if int(i["revision"] or 1) < best[(i["conversation_id"], i["scorer"])]]
        upsert_history(conn, self.revisions, superseded_rows(superseded, now), replace=False)
        reference = self.reference
        upsert_history(conn, self.revisions, [
            record_row(r, reference(r.conversation_id) if reference is not None else None, now)
            for r in records if best[(r.conversation_id, r.scorer)] > 1], replace=True)
        stale = sorted({(str(i["conversation_id"]), str(i["scorer"])) for i in superseded})
        if stale:
            conn.execute(sa.delete(self.table).where(sa.or_(*(
                sa.and_(t.conversation_id == cid, t.scorer == scorer,
                        sa.func.coalesce(t.revision, 1) < best[(cid, scorer)]) for cid, scorer in stale))))
        return [r for r in records if r.revision >= best[(r.conversation_id, r.scorer)]]

    def _revised(self, ids: list[str]) -> bool:
        """Whether any of these conversations has a revision above 1 kept (first scorings need no more)."""
        t, h = self.table.c, self.revisions.c
        later = sa.select(t.conversation_id).where(t.conversation_id.in_(ids), t.revision > 1).exists()
        query = sa.select(sa.or_(later, sa.select(h.conversation_id).where(h.conversation_id.in_(ids)).exists()))
        return bool(self.labels.transact(lambda conn: conn.execute(query).scalar(), "read score revisions"))

    def history(self, conversation_id: str) -> list[dict[str, Any]]:
        """The conversation's kept revisions, oldest first (empty for one scored once): the review page's history."""
        self.ensure_table()
        found: list[dict[str, Any]] = self.labels.transact(
            lambda conn: history(conn, self.revisions, self.table, conversation_id), "read score revisions")
        return found

    def upsert_labels(self, items: Iterable[dict[str, Any]]) -> int:
        """The judge's verdicts with their reasons, from labels-topic messages ``{"conversation", "score"}``.

        Called after :meth:`LabelStore.upsert_raw` accepted the same messages; other shapes carry no score."""
        records = []
        for item in items:
            if isinstance(item.get("score"), dict):
                try:
                    records.append(ScoreRecord.model_validate(item["score"]))
                except ValueError as exc:
                    raise LabelRejected(f"not a judge label: {str(exc)[:300]}") from exc
        return self.upsert(records)

    def upsert_raw(self, items: Iterable[dict[str, Any]]) -> int:
        """Scores-topic messages (decoded JSON); one the codec refuses raises LabelRejected (dead-lettered)."""
        records = []
        for item in items:
            try:
                records.append(decode_score(orjson.dumps(item), self.rubric))
            except ValueError as exc:
                raise LabelRejected(f"not a score record of {self.rubric.key}: {str(exc)[:300]}") from exc
        return self.upsert(records)

    def latest(self, item_id: str, *, since: float, limit: int, scorer: str | None = None) -> list[dict[str, Any]]:
        """The newest conversations the item said yes for since ``since``: the drill-down's rows."""
        self.ensure_table()
        t = self.table.c
        query = sa.select(self.table).where(t.item_id == item_id, t.scored_at >= since)
        if scorer is not None:
            query = query.where(t.scorer == scorer)
        query = query.order_by(t.scored_at.desc()).limit(limit)
        return [dict(r) for r in self.labels.transact(lambda conn: conn.execute(query).mappings().all(), "read scores")]

    def delete_conversations(self, conversation_ids: list[str]) -> int:
        """Delete the conversations' score items and history; the number of score items deleted."""
        self.ensure_table()
        stmt = sa.delete(self.table).where(self.table.c.conversation_id.in_(conversation_ids))
        revisions = sa.delete(self.revisions).where(self.revisions.c.conversation_id.in_(conversation_ids))

        def delete(conn: sa.Connection) -> int:
            conn.execute(revisions)
            return int(conn.execute(stmt).rowcount)

        return int(self.labels.transact(delete, "delete score items"))

    def resolve(self, references: list[str]) -> dict[str, str]:
        """Reference -> conversation id, for the references some stored row carries."""
        self.ensure_table()
        t = self.table.c
        h = self.revisions.c
        query = sa.union(sa.select(t.conversation_ref, t.conversation_id).where(t.conversation_ref.in_(references)),
                         sa.select(h.conversation_ref, h.conversation_id).where(h.conversation_ref.in_(references)))
        found = self.labels.transact(lambda conn: conn.execute(query).all(), "resolve references")
        return {str(ref): str(cid) for ref, cid in found}

    def purge(self, *, older_than_days: float | None = None, now: float | None = None) -> int:
        """Delete score items and history rows scored more than N days ago (default: ``score_retention_days``);
        the number of rows deleted."""
        days = self.retention_days if older_than_days is None else older_than_days
        if days is None:
            raise ValueError("purge needs older_than_days or a store created with retention_days")
        self.ensure_table()
        cutoff = (time.time() if now is None else now) - days * DAY_S
        stmt = sa.delete(self.table).where(self.table.c.scored_at < cutoff)
        revisions = sa.delete(self.revisions).where(self.revisions.c.scored_at < cutoff)
        return int(self.labels.transact(lambda conn: conn.execute(stmt).rowcount + conn.execute(revisions).rowcount,
                                        "purge score items"))
