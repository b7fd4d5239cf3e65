"""The score store's privacy: metadata redacted, retention applied, references resolve, forget erases."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import sqlalchemy as sa

from distill.reference_key import conversation_ref, stored_key
from distill.score_store import ScoreStore
from distill.store import DAY_S, LabelStore
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import encode_score
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings
from monitor.judge.redact import Redactor

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)
PLANTED = {"app": "dave@example.net", "locale": "+1 415 555 0100", "model_version": "4111111111111111"}


def record(cid: str, at: float, metadata: dict[str, str] | None = None) -> ScoreRecord:
    items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=True, probability=0.9) for i in RUBRIC.items]
    return ScoreRecord(conversation_id=cid, scorer="distilled", judge="hashing", rubric_set=RUBRIC.id,
                       rubric_version=RUBRIC.version, model_version="m1", items=items, R=-1.0, scored_at=at,
                       metadata=metadata or dict(PLANTED))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def labels(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LabelStore]:
    if request.param == "sqlite":
        store = LabelStore(f"sqlite:///{tmp_path / 'labels.db'}")
    else:
        store = LabelStore(PG_URL, table_prefix=f"t{uuid.uuid4().hex[:8]}_")
    yield store
    if request.param == "postgresql":
        with store.engine.begin() as conn:
            for name in ("score_items", "score_revisions", "reference_key", "labels"):
                conn.execute(sa.text(f'DROP TABLE IF EXISTS "{store.table.name.removesuffix("labels")}{name}"'))
    store.close()


def all_bytes(store: LabelStore) -> str:
    """Every row of every table in the database, as text: what a database dump would show."""
    with store.engine.connect() as conn:
        names = sa.inspect(conn).get_table_names()
        return " ".join(str(conn.execute(sa.text(f'SELECT * FROM "{n}"')).all()) for n in names)


def test_score_items_hold_no_raw_metadata_and_resolve_their_reference(labels: LabelStore) -> None:
    ref = conversation_ref(None, labels)
    scores = ScoreStore(labels, RUBRIC, table_prefix=labels.table.name.removesuffix("labels"), reference=ref,
                        redact=Redactor().redact, retention_days=30)
    scores.upsert_raw([orjson.loads(encode_score(record("c-1", time.time()), RUBRIC))])  # as the scores topic holds it
    dump = all_bytes(labels)
    assert all(value not in dump for value in PLANTED.values()) and "[EMAIL]" in dump
    assert scores.resolve([ref("c-1"), ref("c-unknown")]) == {ref("c-1"): "c-1"}
    assert conversation_ref(None, labels)("c-1") == ref("c-1")  # the key persisted: every process agrees
    assert stored_key(labels) == stored_key(labels)


def test_score_items_past_retention_are_purged(labels: LabelStore) -> None:
    scores = ScoreStore(labels, RUBRIC, table_prefix=labels.table.name.removesuffix("labels"), retention_days=30)
    now = time.time()
    scores.upsert([record(f"old-{i}", now - 100 * DAY_S) for i in range(5)] + [record("new", now - DAY_S)])
    assert scores.purge(now=now) == 5 * len(RUBRIC.items)
    assert {r["conversation_id"] for r in scores.latest(RUBRIC.items[0].id, since=0, limit=100)} == {"new"}


def test_forget_by_reference_erases_and_reports_json_on_stdout(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    labels = LabelStore(url)
    ref = conversation_ref(None, labels)
    scores = ScoreStore(labels, RUBRIC, reference=ref)
    scores.upsert([record("dave@example.net", time.time()), record("keep", time.time())])
    env = {**os.environ, "CONVMON_LABEL_STORE_URL": url, "PYTHONPATH": os.getcwd()}
    result = subprocess.run([sys.executable, "-m", "monitor.cli", "forget", ref("dave@example.net"), "ref-" + "0" * 20],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert report["conversation_ids"] == ["dave@example.net"]
    assert report["unresolved_references"] == ["ref-" + "0" * 20]
    assert report["removed"]["score_items"] == len(RUBRIC.items)
    kafka = {t["topic"] for t in report["not_removed"] if t["store"] == "kafka"}
    assert {"convmon.scores", "convmon.rekeyed", "convmon.events"} <= kafka
    assert any(t["store"] == "prometheus" for t in report["not_removed"])
    assert {r["conversation_id"] for r in scores.latest(RUBRIC.items[0].id, since=0, limit=100)} == {"keep"}
    labels.close()


def test_the_leaders_retention_pass_purges_labels_and_score_items(tmp_path: Path) -> None:
    import asyncio

    from monitor.runtime.retention import purge_once

    labels = LabelStore(f"sqlite:///{tmp_path / 'labels.db'}")
    scores = ScoreStore(labels, RUBRIC, retention_days=30)
    now = time.time()
    scores.upsert([record("old", now - 100 * DAY_S), record("new", now)])
    asyncio.run(purge_once(labels, 90, scores))
    assert {r["conversation_id"] for r in scores.latest(RUBRIC.items[0].id, since=0, limit=100)} == {"new"}
    labels.close()


def test_a_configured_reference_key_wins_and_an_unreachable_store_gets_a_local_key() -> None:
    from pydantic import SecretStr

    configured = conversation_ref(SecretStr("k" * 32), None)
    assert configured("c") == conversation_ref(SecretStr("k" * 32), None)("c")
    down = LabelStore("postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=1")
    local = conversation_ref(None, down)  # logged; references then resolve nowhere
    assert local("c") != configured("c") and local("c").startswith("ref-")
    with pytest.raises(ValueError, match="at least 16"):
        Settings(pii_reference_key="short")
