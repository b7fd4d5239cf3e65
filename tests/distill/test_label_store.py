"""Label store on SQLite and on the local PostgreSQL: idempotent upserts, redaction, filters, retention."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from distill.label_record import LabelRecord
from distill.store import DAY_S, LabelStore
from monitor.contracts.errors import LabelRejected, StoreError
from monitor.contracts.events import Conversation, Feedback, Turn
from monitor.contracts.scores import ItemResult, ScoreRecord

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def pair(cid: str, *, verdict: bool = True, judge: str = "openai:gpt-4o-mini", version: str = "1",
         at: float = 1_700_000_000.0, text: str = "my email is bob@example.com, thanks!") -> tuple:
    conversation = Conversation(
        conversation_id=cid, turns=[Turn(index=0, role="user", text=text), Turn(index=1, role="assistant", text="ok")],
        feedback=Feedback(thumbs="up", csat=5), metadata={"app": "web"},
    )
    items = [ItemResult(item_id="sat.gratitude", polarity="sat", verdict=verdict, score=8.0 if verdict else 0.0),
             ItemResult(item_id="dsat.revision", polarity="dsat", verdict=None, uncertain=True)]
    score = ScoreRecord(conversation_id=cid, scorer="llm", judge=judge, rubric_set="spur-copilot",
                        rubric_version=version, model_version="m", items=items, R=8.0 if verdict else 0.0,
                        scored_at=at)
    return conversation, score


def redact(text: str) -> str:
    return text.replace("bob@example.com", "[EMAIL]")


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LabelStore]:
    url = f"sqlite:///{tmp_path / 'sub' / 'labels.db'}" if request.param == "sqlite" else PG_URL
    # PostgreSQL must be reachable: if it is not, LabelStore raises StoreError and the test fails.
    s = LabelStore(url, table_prefix=f"t{uuid.uuid4().hex[:10]}_", redact=redact, retention_days=30)
    yield s
    s.drop()
    s.close()


def test_upsert_is_idempotent_and_updates(store: LabelStore) -> None:
    assert store.upsert([pair("c1"), pair("c2")]) == 2
    assert store.upsert([pair("c1"), pair("c2")]) == 2  # at-least-once delivery: same rows
    assert store.count() == 2
    store.upsert([pair("c1", verdict=False)])  # re-judged: updated in place
    by_id = {r.conversation_id: r for r in store.fetch()}
    assert len(by_id) == 2 and by_id["c1"].verdicts() == {"sat.gratitude": False, "dsat.revision": None}
    store.upsert([pair("c1", judge="jury:3"), pair("c1", version="2")])  # other judge / rubric version: new keys
    assert store.count() == 4 and store.count(rubric_version="1", judge="openai:gpt-4o-mini") == 2


def test_text_is_redacted_and_fields_round_trip(store: LabelStore) -> None:
    store.upsert([pair("c1")])
    [record] = store.fetch()
    assert record.turns[0].text == "my email is [EMAIL], thanks!"
    assert (record.thumbs, record.csat, record.metadata, record.rubric_key) == ("up", 5, {"app": "web"},
                                                                                 "spur-copilot@1")
    assert record.items[0].score == 8.0 and record.items[1].uncertain
    conversation = record.conversation()
    assert conversation.feedback is not None and conversation.feedback.csat == 5
    # a ready LabelRecord is stored as given
    store.upsert([record.model_copy(update={"conversation_id": "c9"})])
    assert store.count() == 2


def test_metadata_is_redacted_before_it_is_stored(store: LabelStore) -> None:
    """The wiring hands the store the configured Redactor; metadata values pass through it like turns."""
    from monitor.judge.redact import Redactor

    conversation, score = pair("c1")
    conversation = conversation.model_copy(update={"metadata": {"app": "web", "user": "bob@example.com",
                                                                "account": "DE89 3704 0044 0532 0130 00"}})
    store.redact = Redactor().redact
    store.upsert([(conversation, score)])
    [record] = store.fetch()
    assert record.metadata == {"app": "web", "user": "[EMAIL]", "account": "[IBAN]"}


def test_fetch_filters_and_retention(store: LabelStore) -> None:
    now = 1_700_000_000.0
    store.upsert([pair("old", at=now - 40 * DAY_S), pair("mid", at=now - 10 * DAY_S), pair("new", at=now)])
    assert [r.conversation_id for r in store.fetch()] == ["new", "mid", "old"]
    assert [r.conversation_id for r in store.fetch(since=now - 20 * DAY_S, limit=1)] == ["new"]
    assert store.purge(now=now) == 1  # default: the store's retention_days=30
    assert store.purge(older_than_days=5, now=now) == 1
    assert [r.conversation_id for r in store.fetch()] == ["new"]


def test_distilled_scores_are_not_labels(store: LabelStore) -> None:
    conversation, score = pair("c1")
    with pytest.raises(StoreError, match="only judge \\(scorer='llm'\\) records are labels"):
        store.upsert([(conversation, score.model_copy(update={"scorer": "distilled"}))])
    with pytest.raises(StoreError, match="paired with conversation"):
        LabelRecord.from_score(conversation.model_copy(update={"conversation_id": "x"}), score)


def test_unreachable_database_raises_store_error_on_use_not_at_start() -> None:
    # A worker must start while its store is down: construction succeeds, the first use fails clearly.
    store = LabelStore("postgresql+psycopg://postgres:s3cret-pw@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(StoreError, match="cannot create the labels table") as info:
        store.count()
    assert "s3cret-pw" not in str(info.value)
    with pytest.raises(StoreError, match="supports sqlite and postgresql"):
        LabelStore("mysql://u@h/db")


def test_upsert_raw_takes_label_topic_messages_and_rejects_bad_ones(store: LabelStore) -> None:
    """A bad message raises LabelRejected (the sink dead-letters it alone) instead of vanishing."""
    conversation, score = pair("c1")
    good = {"conversation": conversation.model_dump(mode="json"), "score": score.model_dump(mode="json")}
    distilled = {**good, "score": {**good["score"], "scorer": "distilled"}}
    for bad in (distilled, {"conversation": {}, "score": {}}, {"nonsense": 1}):
        with pytest.raises(LabelRejected, match="not a judge label"):
            store.upsert_raw([good, bad])
    assert store.count() == 0
    assert store.upsert_raw([good]) == 1
    [record] = store.fetch()
    assert record.turns[0].text == "my email is [EMAIL], thanks!"
    assert store.upsert_raw([record.model_dump(mode="json")]) == 1 and store.count() == 1
