"""The review page's reads and writes on PostgreSQL (production's label store): reasons kept across both sinks,
the flagged list, a review and the agreement it gives, a re-scored conversation's revisions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from monitor.tools.review.data import Filters, ReviewData
from tests.review.stored import ITEM, settings, store_judged, store_revisions

BASE = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture
def pg_url() -> Iterator[str]:
    schema = f"review_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(BASE)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{BASE}?options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        engine.dispose()


def test_flagged_rows_review_and_agreement_on_postgresql(pg_url: str) -> None:
    store_judged(pg_url, 6)
    data = ReviewData(settings(pg_url, ui_labels=True))
    try:
        rows = data.flagged_rows(Filters(item=ITEM))
        assert len(rows) == 3 and all(r["explanation"] == "the user complained about the answer, wrote [EMAIL]"
                                      for r in rows)
        assert data.record_review("user0@example.com", {ITEM: "agree"}, "dsat") == 2
        assert data.record_review("user1@example.com", {ITEM: "disagree"}, None) == 1
        stats = data.agreement()[ITEM]
        assert stats["labels"] == 2 and stats["agreement"].value == pytest.approx(0.02 / (0.02 + 1.0))
        store_revisions(pg_url, "user1@example.com", [set(), {ITEM}])  # revision 1 said no to every item
        assert [(r["revision"], r["scorer"], list(r["yes"]), r["counted"])
                for r in data.conversation("user1@example.com")["revisions"]] == [(2, "distilled", [ITEM], True)]
    finally:
        data.close()
