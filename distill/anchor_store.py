"""The anchor set in the label store: human-labelled conversations the judge re-judges, and each run's verdicts.

Four tables beside the labels, in the same database (SQLite or PostgreSQL): ``anchor_sets`` (one row per
name and version, with the current baseline epoch), ``anchors`` (a keyed reference instead of the
conversation id, the redacted conversation and its human item labels), ``anchor_runs`` (when, why, under which
judge provenance, at what cost) and ``anchor_verdicts`` (one row per run, anchor and item). Runs since the
set's epoch started are the baseline the drift test compares with; ``new_epoch`` starts a new baseline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from distill.store import LabelStore, sanitise
from monitor.contracts.errors import StoreError
from monitor.contracts.events import Conversation


@dataclass(frozen=True)
class Anchor:
    ref: str  # keyed reference of the conversation id
    conversation: Conversation  # redacted; its conversation_id is the reference
    human: dict[str, bool]  # item id -> the human label


@dataclass(frozen=True)
class AnchorRun:
    run_id: int
    epoch: int
    started_at: float
    reason: str
    provenance: dict[str, str]
    calls: int
    cost_usd: float
    complete: bool


def _tables(metadata: sa.MetaData, prefix: str) -> dict[str, sa.Table]:
    sets = sa.Table(
        f"{prefix}anchor_sets", metadata,
        sa.Column("name", sa.String(128), primary_key=True), sa.Column("version", sa.String(64), primary_key=True),
        sa.Column("loaded_at", sa.Float, nullable=False), sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("size", sa.Integer, nullable=False))
    anchors = sa.Table(
        f"{prefix}anchors", metadata,
        sa.Column("name", sa.String(128), primary_key=True), sa.Column("version", sa.String(64), primary_key=True),
        sa.Column("ref", sa.String(128), primary_key=True),
        sa.Column("conversation", sa.JSON, nullable=False), sa.Column("human", sa.JSON, nullable=False))
    runs = sa.Table(
        f"{prefix}anchor_runs", metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False), sa.Column("version", sa.String(64), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False), sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("reason", sa.String(32), nullable=False), sa.Column("provenance", sa.JSON, nullable=False),
        sa.Column("calls", sa.Integer, nullable=False, default=0),
        sa.Column("cost_usd", sa.Float, nullable=False, default=0.0),
        sa.Column("complete", sa.Boolean, nullable=False, default=False))
    verdicts = sa.Table(
        f"{prefix}anchor_verdicts", metadata,
        sa.Column("run_id", sa.Integer, primary_key=True), sa.Column("ref", sa.String(128), primary_key=True),
        sa.Column("item_id", sa.String(128), primary_key=True), sa.Column("verdict", sa.Boolean, nullable=False))
    return {"sets": sets, "anchors": anchors, "runs": runs, "verdicts": verdicts}


class AnchorStore:
    """Anchor sets, runs and verdicts in the label store's database (``store.engine``)."""

    def __init__(self, store: LabelStore, *, table_prefix: str = "convmon_") -> None:
        self.engine = store.engine
        self.metadata = sa.MetaData()
        self.t = _tables(self.metadata, table_prefix)
        self._created = False

    def transact(self, work: Callable[[sa.Connection], Any], what: str) -> Any:
        try:
            with self.engine.begin() as conn:
                if not self._created:
                    self.metadata.create_all(conn)
                    self._created = True
                return work(conn)
        except SQLAlchemyError as exc:
            raise StoreError(f"label store {self.engine.url.render_as_string()!r}: cannot {what}: "
                             f"{type(exc).__name__}") from exc

    def load(self, name: str, version: str, anchors: Iterable[Anchor]) -> int:
        """Store a new version of the set (a version already stored is refused: versions are immutable)."""
        rows = [{"name": name, "version": version, "ref": a.ref, "human": a.human,
                 "conversation": sanitise(a.conversation.model_dump(mode="json", exclude_none=True))} for a in anchors]
        sets = self.t["sets"]

        def work(conn: sa.Connection) -> int:
            exists = conn.execute(sa.select(sets.c.version).where(sets.c.name == name, sets.c.version == version))
            if exists.first() is not None:
                raise StoreError(f"anchor set {name!r} version {version!r} is already loaded; versions are "
                                 "immutable: load the changed file under a new --version")
            conn.execute(sa.insert(sets), [{"name": name, "version": version, "loaded_at": time.time(), "epoch": 0,
                                            "size": len(rows)}])
            if rows:
                conn.execute(sa.insert(self.t["anchors"]), rows)
            return len(rows)

        return int(self.transact(work, "load the anchor set"))

    def latest_version(self, name: str) -> tuple[str, int] | None:
        """The most recently loaded version of ``name`` and its baseline epoch, or None."""
        sets = self.t["sets"]
        query = sa.select(sets.c.version, sets.c.epoch).where(sets.c.name == name).order_by(sets.c.loaded_at.desc())
        row = self.transact(lambda conn: conn.execute(query.limit(1)).first(), "read anchor sets")
        return (str(row[0]), int(row[1])) if row is not None else None

    def anchors(self, name: str, version: str) -> list[Anchor]:
        a = self.t["anchors"]
        query = sa.select(a).where(a.c.name == name, a.c.version == version).order_by(a.c.ref)
        rows = self.transact(lambda conn: conn.execute(query).mappings().all(), "read anchors")
        return [Anchor(r["ref"], Conversation.model_validate(r["conversation"]), dict(r["human"])) for r in rows]

    def new_epoch(self, name: str, version: str) -> int:
        """Start a new baseline: the next run is compared with nothing before it."""
        sets = self.t["sets"]
        where = (sets.c.name == name, sets.c.version == version)

        def work(conn: sa.Connection) -> int:
            conn.execute(sa.update(sets).where(*where).values(epoch=sets.c.epoch + 1))
            return int(conn.execute(sa.select(sets.c.epoch).where(*where)).scalar_one())

        return int(self.transact(work, "start a new baseline"))

    def start_run(self, name: str, version: str, epoch: int, *, reason: str, provenance: dict[str, str],
                  now: float | None = None) -> int:
        row = {"name": name, "version": version, "epoch": epoch, "started_at": time.time() if now is None else now,
               "reason": reason, "provenance": provenance, "calls": 0, "cost_usd": 0.0, "complete": False}

        def work(conn: sa.Connection) -> int:
            key = conn.execute(sa.insert(self.t["runs"]), row).inserted_primary_key
            assert key is not None
            return int(key[0])

        return int(self.transact(work, "record an anchor run"))

    def record(self, run_id: int, ref: str, verdicts: dict[str, bool], *, calls: int, cost_usd: float) -> None:
        """One anchor's verdicts of a run, and what judging it cost."""
        runs = self.t["runs"]
        rows = [{"run_id": run_id, "ref": ref, "item_id": item, "verdict": v} for item, v in verdicts.items()]

        def work(conn: sa.Connection) -> None:
            if rows:
                conn.execute(sa.insert(self.t["verdicts"]), rows)
            conn.execute(sa.update(runs).where(runs.c.id == run_id).values(
                calls=runs.c.calls + calls, cost_usd=runs.c.cost_usd + cost_usd))

        self.transact(work, "record anchor verdicts")

    def finish_run(self, run_id: int, *, complete: bool) -> None:
        runs = self.t["runs"]
        self.transact(lambda conn: conn.execute(sa.update(runs).where(runs.c.id == run_id).values(complete=complete)),
                  "finish an anchor run")

    def runs(self, name: str, version: str, epoch: int | None = None) -> list[AnchorRun]:
        """Runs of the set (of one epoch when given), oldest first."""
        r = self.t["runs"]
        query = sa.select(r).where(r.c.name == name, r.c.version == version)
        if epoch is not None:
            query = query.where(r.c.epoch == epoch)
        rows = self.transact(lambda conn: conn.execute(query.order_by(r.c.id)).mappings().all(), "read anchor runs")
        return [AnchorRun(x["id"], x["epoch"], x["started_at"], x["reason"], dict(x["provenance"]), x["calls"],
                          x["cost_usd"], bool(x["complete"])) for x in rows]

    def verdicts(self, run_ids: list[int]) -> list[tuple[int, str, str, bool]]:
        """(run id, anchor ref, item id, verdict) of the given runs."""
        v = self.t["verdicts"]
        query = sa.select(v.c.run_id, v.c.ref, v.c.item_id, v.c.verdict).where(v.c.run_id.in_(run_ids))
        rows = self.transact(lambda conn: conn.execute(query).all(), "read anchor verdicts") if run_ids else []
        return [(int(a), str(b), str(c), bool(d)) for a, b, c, d in rows]

    def forget(self, refs: list[str]) -> int:
        """Erase these conversations (by keyed reference) from every version and run; returns anchors deleted."""
        a, v = self.t["anchors"], self.t["verdicts"]

        def work(conn: sa.Connection) -> int:
            conn.execute(sa.delete(v).where(v.c.ref.in_(refs)))
            return int(conn.execute(sa.delete(a).where(a.c.ref.in_(refs))).rowcount)

        return int(self.transact(work, "erase anchors")) if refs else 0

    def drop(self) -> None:
        """Drop the four tables (tests and teardown)."""
        self.transact(lambda conn: self.metadata.drop_all(conn), "drop the anchor tables")
