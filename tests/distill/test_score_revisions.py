"""The score store keeps every revision of a re-scored conversation with its number, on SQLite and
PostgreSQL; the score items keep the latest per scorer (what the rates count), first scorings stay one row each."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import sqlalchemy as sa

from distill.score_store import ScoreStore
from distill.store import DAY_S, LabelStore
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import encode_score
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings
from monitor.judge.reference import ConversationRef

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)
A, B = [i for i in RUBRIC.items if i.polarity == "dsat"][:2]
REF = ConversationRef(b"k" * 32)


def scored(revision: int, at: float, yes: set[str], scorer: str = "distilled", cid: str = "conv-1") -> ScoreRecord:
    if scorer == "distilled":
        items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=i.id in yes,
                            probability=0.9 if i.id in yes else 0.1) for i in RUBRIC.items]
    else:
        items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=i.id in yes,
                            score=8.0 if i.id in yes else 1.0) for i in RUBRIC.items]
    return ScoreRecord(conversation_id=cid, scorer=scorer, judge="stand-in", rubric_set=RUBRIC.id,
                       rubric_version=RUBRIC.version, model_version=f"m{revision}", items=items, R=-1.0,
                       scored_at=at, revision=revision)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def scores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ScoreStore]:
    prefix = "convmon_" if request.param == "sqlite" else f"t{uuid.uuid4().hex[:8]}_"
    labels = LabelStore(f"sqlite:///{tmp_path / 'l.db'}" if request.param == "sqlite" else PG_URL,
                        table_prefix=prefix)
    yield ScoreStore(labels, RUBRIC, table_prefix=prefix, reference=REF, retention_days=30)
    if request.param == "postgresql":
        with labels.engine.begin() as conn:
            for name in ("score_items", "score_revisions", "labels"):
                conn.execute(sa.text(f'DROP TABLE IF EXISTS "{prefix}{name}"'))
    labels.close()


def counted(store: ScoreStore, item: str) -> list[tuple[str, str, int]]:
    return sorted((r["conversation_id"], r["scorer"], r["revision"]) for r in store.latest(item, since=0, limit=50))


def test_every_revision_is_kept_with_its_number_and_the_latest_counts(scores: ScoreStore) -> None:
    scores.upsert([scored(1, 100.0, {A.id}), scored(1, 110.0, {A.id}, "llm"), scored(1, 100.0, set(), cid="once")])
    assert scores.history("conv-1") == [] and scores.history("once") == []  # scored once: no history
    scores.upsert_raw([orjson.loads(encode_score(scored(2, 200.0, {B.id}), RUBRIC))])  # as the scores topic holds it
    scores.upsert([scored(1, 100.0, {A.id})])  # revision 1 again, late: kept in the history, not counted
    scores.upsert([scored(3, 300.0, set())])  # revision 3 said no to every item
    seen = [(r["revision"], r["scorer"], r["scored_at"], sorted(r["yes"]), r["model_version"], r["counted"])
            for r in scores.history("conv-1")]
    assert seen == [(1, "distilled", 100.0, [A.id], "m1", False), (1, "llm", 110.0, [A.id], "m1", True),
                    (2, "distilled", 200.0, [B.id], "m2", False), (3, "distilled", 300.0, [], "m3", True)]
    assert counted(scores, A.id) == [("conv-1", "llm", 1)]  # the judge's latest judged revision still says yes
    assert counted(scores, B.id) == []  # revision 3 no longer says yes for B
    scores.upsert([scored(2, 210.0, {B.id}, "llm")])  # the judge answers revision 2
    assert counted(scores, A.id) == [] and counted(scores, B.id) == [("conv-1", "llm", 2)]
    judge = [(r["revision"], sorted(r["yes"]), r["counted"]) for r in scores.history("conv-1") if r["scorer"] == "llm"]
    assert judge == [(1, [A.id], False), (2, [B.id], True)]
    assert scores.resolve([REF("conv-1")]) == {REF("conv-1"): "conv-1"}
    with scores.labels.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(scores.revisions)).scalar_one() == 5
    assert scores.purge(now=300.0 + 30 * DAY_S - 150) == 2  # history rows of revisions 1 (judge's 1 was moved)
    assert [(r["revision"], r["scorer"]) for r in scores.history("conv-1")] == [
        (2, "distilled"), (2, "llm"), (3, "distilled")]
    scores.delete_conversations(["conv-1"])
    assert scores.history("conv-1") == [] and scores.resolve([REF("conv-1")]) == {}
