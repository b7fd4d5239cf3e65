"""Anchor sets, runs and verdicts on SQLite and on the local PostgreSQL: immutable versions, epochs, run costs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from distill.anchor_store import Anchor, AnchorStore
from distill.store import LabelStore
from monitor.contracts.errors import StoreError
from monitor.contracts.events import Conversation, Turn

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def anchor(ref: str, *, yes: bool = True) -> Anchor:
    conversation = Conversation(conversation_id=ref, turns=[Turn(index=0, role="user", text="that is wrong\x00")])
    return Anchor(ref, conversation, {"dsat.revision": yes})


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AnchorStore]:
    url = f"sqlite:///{tmp_path / 'labels.db'}" if request.param == "sqlite" else PG_URL
    labels = LabelStore(url)
    s = AnchorStore(labels, table_prefix=f"t{uuid.uuid4().hex[:10]}_")
    yield s
    s.drop()
    labels.close()


def test_a_set_loads_once_per_version_and_the_latest_is_current(store: AnchorStore) -> None:
    assert store.latest_version("default") is None
    assert store.load("default", "v1", [anchor("r1"), anchor("r2", yes=False)]) == 2
    with pytest.raises(StoreError, match="version 'v1' is already loaded; versions are immutable"):
        store.load("default", "v1", [anchor("r3")])
    store.load("default", "v2", [anchor("r3")])
    assert store.latest_version("default") == ("v2", 0)
    loaded = store.anchors("default", "v1")
    assert [(a.ref, a.human) for a in loaded] == [("r1", {"dsat.revision": True}), ("r2", {"dsat.revision": False})]
    assert loaded[0].conversation.turns[0].text == "that is wrong\ufffd"  # PostgreSQL refuses NUL


def test_runs_record_verdicts_and_cost_and_a_new_epoch_starts_a_new_baseline(store: AnchorStore) -> None:
    store.load("default", "v1", [anchor("r1"), anchor("r2")])
    provenance = {"judge": "simulated", "model": "simulated", "prompt_hash": "abc", "rubric_version": "x@1"}
    run = store.start_run("default", "v1", 0, reason="first", provenance=provenance, now=100.0)
    store.record(run, "r1", {"dsat.revision": True}, calls=1, cost_usd=0.002)
    store.record(run, "r2", {"dsat.revision": False}, calls=1, cost_usd=0.003)
    store.finish_run(run, complete=True)
    (recorded,) = store.runs("default", "v1", 0)
    assert (recorded.calls, round(recorded.cost_usd, 6), recorded.complete) == (2, 0.005, True)
    assert recorded.provenance == provenance and recorded.started_at == 100.0
    assert sorted(store.verdicts([run])) == [(run, "r1", "dsat.revision", True), (run, "r2", "dsat.revision", False)]
    assert store.new_epoch("default", "v1") == 1
    assert store.latest_version("default") == ("v1", 1)
    assert store.runs("default", "v1", 1) == [] and len(store.runs("default", "v1")) == 1
