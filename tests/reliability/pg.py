"""The local PostgreSQL (127.0.0.1:5432, trust auth, database ``test``) for the edge fault tests.

Other suites use the same database: everything here lives in its own schema (``convmon_edges``)
with per-test table prefixes, and an outage is always short and always ended in a ``finally``.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from distill.store import LabelStore
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.scores import ItemResult, ScoreRecord

SCHEMA = "convmon_edges"
BASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
URL = f"{BASE_URL}?options=-csearch_path%3D{SCHEMA}"  # every table convmon creates lands in our schema


def ensure_schema() -> None:
    engine = sa.create_engine(BASE_URL)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
    engine.dispose()


@contextlib.contextmanager
def pg_store(prefix: str | None = None, **kwargs: Any) -> Iterator[LabelStore]:
    ensure_schema()
    store = LabelStore(URL, table_prefix=prefix or f"t{uuid.uuid4().hex[:8]}_", **kwargs)
    try:
        yield store
    finally:
        store.drop()
        store.close()


def _cluster() -> str:
    versions = sorted(p.name for p in Path("/etc/postgresql").iterdir())
    return versions[-1]


def pg_ctl(action: str) -> None:
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", _cluster(), "main", action], check=True,
                   capture_output=True, timeout=60)


def pg_up(timeout: float = 30.0) -> bool:
    engine = sa.create_engine(BASE_URL)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                with engine.connect() as conn:
                    conn.execute(sa.text("SELECT 1"))
                return True
            except sa.exc.OperationalError:
                time.sleep(0.3)
        return False
    finally:
        engine.dispose()


@contextlib.contextmanager
def pg_outage() -> Iterator[None]:
    """PostgreSQL stopped for the body; always started again (and reachable) afterwards."""
    pg_ctl("stop")
    try:
        yield
    finally:
        try:
            pg_ctl("start")
        finally:
            assert pg_up(), "PostgreSQL did not come back after the outage"


def label_message(cid: str, *, text: str = "thanks, that worked") -> dict[str, Any]:
    """One labels-topic message as the judge agent writes it."""
    conversation = Conversation(conversation_id=cid, turns=[Turn(index=0, role="user", text=text),
                                                            Turn(index=1, role="assistant", text="ok")])
    score = ScoreRecord(conversation_id=cid, scorer="llm", judge="openai:test", rubric_set="spur-copilot",
                        rubric_version="1", model_version="m", R=8.0,
                        items=[ItemResult(item_id="sat.gratitude", polarity="sat", verdict=True, score=8.0)])
    return {"conversation": conversation.model_dump(mode="json"), "score": score.model_dump(mode="json")}
