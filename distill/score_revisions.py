"""The score store's history of re-scored conversations: one row per (conversation, scorer, revision).

``<prefix>score_items`` keeps the yes rows of each conversation's latest revision (what the flagged list, the
Grafana drill-down and ``convmon inspect`` show, and what the rates count); this table keeps every revision of a
conversation that has more than one, with its number, when it was scored and its yes verdicts (item -> score or
probability; "no" is the complement, as in the score items). Rows are written only for conversations the user came
back to: a record of revision 2 or later, a late record of an earlier revision, and the revision a later one
supersedes, from its score items before they are deleted. A first revision that said no to every item leaves no
row (nothing of it was stored), so the review page lists the revisions it has and says so. Same retention and
``forget`` as the score items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from monitor.contracts.scores import ScoreRecord, verdict_label

HISTORY_KEY = ("conversation_id", "scorer", "revision")


def history_table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    return sa.Table(
        f"{prefix}score_revisions", metadata,
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("scorer", sa.String(16), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("scored_at", sa.Float, nullable=False, index=True),
        sa.Column("model_version", sa.String(128), nullable=False),
        sa.Column("yes", sa.JSON, nullable=False),  # item id -> score or probability (None when neither)
        sa.Column("conversation_ref", sa.String(32)),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint(*HISTORY_KEY, name=f"{prefix}score_revisions_key"),
    )


def record_row(record: ScoreRecord, reference: str | None, now: float) -> dict[str, Any]:
    yes = {i.item_id: i.score if i.score is not None else i.probability
           for i in record.items if verdict_label(record.scorer, i) == "yes"}
    return {"conversation_id": record.conversation_id, "scorer": record.scorer, "revision": record.revision,
            "scored_at": record.scored_at, "model_version": record.model_version, "yes": yes,
            "conversation_ref": reference, "updated_at": now}


def superseded_rows(items: Iterable[Mapping[str, Any]], now: float) -> list[dict[str, Any]]:
    """History rows of superseded score items (one revision of one conversation and scorer per row)."""
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    for item in items:
        key = (str(item["conversation_id"]), str(item["scorer"]), int(item["revision"] or 1))
        row = out.setdefault(key, {"conversation_id": key[0], "scorer": key[1], "revision": key[2],
                                   "scored_at": item["scored_at"], "model_version": item["model_version"],
                                   "yes": {}, "conversation_ref": item["conversation_ref"], "updated_at": now})
        row["yes"][item["item_id"]] = item["value"]
        row["scored_at"] = max(row["scored_at"], item["scored_at"])
    return list(out.values())


def upsert_history(conn: sa.Connection, table: sa.Table, rows: Sequence[dict[str, Any]], *, replace: bool) -> None:
    """``replace``: a record's own row wins over one kept before; else a row already kept stays (a superseded
    revision's items say less than its record did)."""
    if not rows:
        return
    insert = (sqlite if conn.dialect.name == "sqlite" else postgresql).insert(table)
    if replace:
        updated = {c.name: insert.excluded[c.name] for c in table.columns if c.name not in HISTORY_KEY}
        stmt = insert.on_conflict_do_update(index_elements=list(HISTORY_KEY), set_=updated)
    else:
        stmt = insert.on_conflict_do_nothing(index_elements=list(HISTORY_KEY))
    conn.execute(stmt, list({tuple(r[k] for k in HISTORY_KEY): r for r in rows}.values()))


def history(conn: sa.Connection, table: sa.Table, items: sa.Table, conversation_id: str) -> list[dict[str, Any]]:
    """The revisions of a conversation scored more than once (else empty), oldest first: the history's rows and,
    for a scorer that scored one revision only, its score items; each with ``counted``, the latest of its scorer's
    (what the rates count: the judge's is its latest judged revision)."""
    t, i = table.c, items.c
    rows = [dict(r) for r in conn.execute(sa.select(table).where(t.conversation_id == conversation_id)).mappings()]
    query = sa.select(i.conversation_id, i.scorer, i.item_id, i.value, i.scored_at, i.model_version,
                      i.conversation_ref, i.revision).where(i.conversation_id == conversation_id)
    kept = {(r["scorer"], r["revision"]) for r in rows}
    rows += [r for r in superseded_rows([dict(r) for r in conn.execute(query).mappings()], 0.0)
             if (r["scorer"], r["revision"]) not in kept]
    if max((r["revision"] for r in rows), default=1) <= 1:
        return []
    latest: dict[str, int] = {}
    for row in rows:
        latest[row["scorer"]] = max(latest.get(row["scorer"], 0), row["revision"])
    for row in rows:
        row["counted"] = row["revision"] == latest[row["scorer"]]
    return sorted(rows, key=lambda r: (r["revision"], r["scorer"]))
