"""The drill-down table's SQL (deploy/grafana/generate.py) against real PostgreSQL and rows the score store wrote."""

from __future__ import annotations

import time
import uuid

import pytest
import sqlalchemy as sa

from distill.score_store import ScoreStore
from distill.store import LabelStore
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import REPO_ROOT, Settings

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)


def grafana_sql(table: str, item: str, start: float, end: float) -> str:
    """What Grafana sends: its variable and $__unixEpochFilter macro expanded, our table name."""
    import runpy

    sql = runpy.run_path(str(REPO_ROOT / "deploy" / "grafana" / "generate.py"))["DRILL_DOWN_SQL"]
    assert "FROM convmon_score_items" in sql
    return (sql.replace("convmon_score_items", table).replace("$rubric", item)
            .replace("$__unixEpochFilter(scored_at)", f"scored_at >= {start} AND scored_at <= {end}"))


def record(cid: str, scorer: str, yes: set[str], at: float, span: str | None = None) -> ScoreRecord:
    items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=i.id in yes,
                        probability=0.9 if i.id in yes else 0.1) for i in RUBRIC.items]
    return ScoreRecord(conversation_id=cid, scorer=scorer, judge="hashing", rubric_set=RUBRIC.id,  # type: ignore[arg-type]
                       rubric_version=RUBRIC.version, model_version="m1", items=items, R=-1.0, scored_at=at,
                       span=span)


@pytest.mark.integration
def test_latest_dsat_conversations_per_item_on_postgresql() -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    labels = LabelStore(PG_URL, table_prefix=prefix)
    store = ScoreStore(labels, RUBRIC, table_prefix=prefix)
    dsat = next(i.id for i in RUBRIC.items if i.polarity == "dsat")
    other = next(i.id for i in RUBRIC.items if i.polarity == "dsat" and i.id != dsat)
    now = time.time()
    span = "ab" * 16 + "-" + "cd" * 8
    try:
        written = store.upsert([
            record("old", "distilled", {dsat}, now - 7200), record("a", "distilled", {dsat}, now - 60),
            record("b", "llm", {dsat, other}, now - 30, span), record("c", "distilled", {other}, now)])
        store.upsert([record("b", "llm", {dsat, other}, now - 30, span)])  # re-delivered: upserted, not doubled
        assert written == 5
        with labels.engine.connect() as conn:
            rows = conn.execute(sa.text(grafana_sql(f"{prefix}score_items", dsat, now - 3600, now))).mappings().all()
        assert [(r["conversation_id"], r["scorer"], r["trace_id"]) for r in rows] == [("b", "llm", "ab" * 16),
                                                                                      ("a", "distilled", None)]
        assert [r["conversation_id"] for r in store.latest(other, since=now - 3600, limit=10)] == ["c", "b"]
        assert store.delete_conversations(["b"]) == 2
    finally:
        store.metadata.drop_all(labels.engine)
        labels.drop()
        labels.close()
