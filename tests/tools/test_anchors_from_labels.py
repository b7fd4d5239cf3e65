"""``convmon anchors load --from-human-labels``: the review page's answers and imported labels become an anchor set
(redacted, referenced, every left-out conversation counted under its reason), a run of the judge over HTTP is
compared with those human answers, too few labels is one line naming the minimum, and the minimum is where the
drift test starts to find a judge change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from distill.anchor_store import AnchorStore
from distill.store import LabelStore
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import REPO_ROOT, load_settings
from monitor.drift.anchor_drift import evaluate_item
from monitor.judge.redact import Redactor
from monitor.tools.anchors.from_labels import MIN_ANCHORS
from monitor.tools.openai_server import OpenAIServer
from monitor.tools.review.data import ReviewData

RUBRIC = load_rubric_set("spur-copilot", REPO_ROOT / "prompts")
ITEM = "dsat.repetition"  # the stand-in judge says yes when a user turn says "again"
KEY = "k" * 32
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'labels.db'}"
        return
    schema = f"anchors_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(PG)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{PG}?options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        engine.dispose()


def repeated(k: int) -> bool:
    return k % 3 == 0


def store_judged(url: str, n: int) -> list[str]:
    """``n`` judged conversations written through the label sink's upsert, as the worker stores them: redacted
    turns, the judge's verdicts (right, on ITEM, by the stand-in's keyword)."""
    labels = LabelStore(url, redact=Redactor().redact)
    ids = [f"user{k}@example.com" for k in range(n)]
    messages = []
    for k, cid in enumerate(ids):
        text = f"you said that again, mail {cid}" if repeated(k) else f"thanks, mail {cid}"
        conversation = Conversation(conversation_id=cid, metadata={"app": "shop"}, turns=[
            Turn(index=0, role="user", text=text), Turn(index=1, role="assistant", text="sure")])
        items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=i.id == ITEM and repeated(k),
                            score=7.0 if i.id == ITEM and repeated(k) else 0.0) for i in RUBRIC.items]
        score = ScoreRecord(conversation_id=cid, scorer="llm", judge="stand-in", rubric_set=RUBRIC.id,
                            rubric_version=RUBRIC.version, model_version="judge-1", items=items, R=0.0,
                            scored_at=time.time() - k, inclusion_probability=0.5, sampled_by="hash")
        messages.append({"conversation": conversation.model_dump(mode="json"), "score": score.model_dump(mode="json")})
    labels.upsert_raw(messages)
    labels.close()
    return ids


def convmon(url: str, *args: str, server: OpenAIServer | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env.update(CONVMON_LABEL_STORE_URL=url, CONVMON_PII_REFERENCE_KEY=KEY, PYTHONPATH=str(REPO_ROOT))
    if server is not None:
        env.update(CONVMON_OPENAI_BASE_URL=server.url, CONVMON_OPENAI_API_KEY="sk-test-123456")
    return subprocess.run([sys.executable, "-m", "monitor.cli", *args], env=env, capture_output=True, text=True,
                          timeout=180)


def review(url: str, ids: list[str], disagree: set[int]) -> None:
    """A reviewer on the review page: agrees with the judge on ITEM, except on ``disagree``."""
    data = ReviewData(load_settings(label_store_url=url, pii_reference_key=KEY, ui_labels=True))
    try:
        for k, cid in enumerate(ids):
            answer = "disagree" if k in disagree else "agree"
            assert data.record_review(cid, {ITEM: answer}, "dsat" if repeated(k) else "sat") == 2
    finally:
        data.close()


def test_review_and_imported_labels_become_anchors_the_judge_is_compared_with(url: str, tmp_path: Path) -> None:
    ids = store_judged(url, 70)
    review(url, ids[:60], disagree={0, 1, 2, 4, 5, 7})  # six answers where people say the judge was wrong
    rows = [{"conversation_id": cid, "item_id": ITEM, "answer": "yes" if repeated(k) != (k == 60) else "no"}
            for k, cid in enumerate(ids) if k >= 60]  # one wrong judge verdict among the ten imported
    rows += [{"conversation_id": cid, "item_id": "sat.gratitude", "answer": "no" if repeated(k) else "yes"}
             for k, cid in enumerate(ids) if k >= 60]
    rows += [{"conversation_id": "c-never-judged", "item_id": ITEM, "answer": "yes"},
             {"conversation_id": "ref-0123456789abcdef0123", "item_id": ITEM, "answer": "no"},
             {"conversation_id": "c-overall-only", "item_id": "overall", "answer": "dsat"}]
    (tmp_path / "people.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    imported = convmon(url, "labels", "import", str(tmp_path / "people.jsonl"))
    assert imported.returncode == 0, imported.stderr

    built = convmon(url, "anchors", "load", "--from-human-labels")
    assert built.returncode == 0, built.stderr
    out = json.loads(built.stdout)
    assert out["anchors"] == 70 and out["version"].startswith("human-")
    assert out["skipped"] == {"no_text": 1, "reference_id": 1, "only_overall": 1}
    assert out["items"] == {ITEM: {"yes": 27, "no": 43}, "sat.gratitude": {"yes": 6, "no": 4}}
    assert "loaded 70 anchors" in built.stderr and "skipped 3: 1 no judged conversation" in built.stderr

    labels = LabelStore(url)
    anchors = AnchorStore(labels).anchors("default", out["version"])
    data = ReviewData(load_settings(label_store_url=url, pii_reference_key=KEY))
    assert {a.ref for a in anchors} == {data.shown(cid) for cid in ids}  # the review page's names, never raw ids
    data.close()
    assert not any("@example.com" in a.conversation.model_dump_json() for a in anchors)
    labels.close()

    with OpenAIServer() as server:
        run = convmon(url, "anchors", "run", "--once", server=server)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["run"]["judged"] == 70 and server.chat_calls >= 70
    status = json.loads(convmon(url, "anchors", "status").stdout)
    assert status["version"] == out["version"]
    assert status["items"][ITEM]["human_agreement_baseline"] == pytest.approx(63 / 70)  # 6 + 1 disagreements
    assert status["items"]["sat.gratitude"]["human_agreement_baseline"] == 1.0
    assert np.isnan(status["items"]["sat.praise"]["human_agreement_baseline"] or np.nan)  # nobody labelled it

    again = convmon(url, "anchors", "load", "--from-human-labels")
    assert again.returncode == 0 and "is current: no new human labels" in again.stderr
    review(url, ids[:1], disagree=set())  # a reviewer changes an answer: a new version
    newer = convmon(url, "anchors", "load", "--from-human-labels")
    assert newer.returncode == 0 and json.loads(newer.stdout)["version"] not in (out["version"],)
    assert json.loads(convmon(url, "anchors", "status").stdout)["version"] == json.loads(newer.stdout)["version"]

    forgot = convmon(url, "forget", ids[3])  # in both versions: gone from both, with its verdicts
    assert forgot.returncode == 0 and json.loads(forgot.stdout)["removed"]["anchors"] == 2, forgot.stderr
    labels = LabelStore(url)
    store = AnchorStore(labels)
    gone = data.shown(ids[3])
    assert gone not in {a.ref for a in store.anchors("default", out["version"])}
    assert len(store.anchors("default", out["version"])) == 69
    run_ids = [r.run_id for r in store.runs("default", out["version"])]
    assert run_ids and all(ref != gone for _, ref, _, _ in store.verdicts(run_ids))
    labels.close()


def test_too_few_labelled_conversations_is_one_line_naming_the_minimum(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    ids = store_judged(url, MIN_ANCHORS - 1)
    review(url, ids, disagree=set())
    (tmp_path / "x.jsonl").write_text(json.dumps({"conversation_id": "gone", "item_id": ITEM, "answer": "no"}))
    assert convmon(url, "labels", "import", str(tmp_path / "x.jsonl")).returncode == 0
    out = convmon(url, "anchors", "load", "--from-human-labels")
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1, out.stderr
    assert f"only {MIN_ANCHORS - 1} conversations have human item labels and stored text" in out.stderr
    assert "skipped 1: 1 no judged conversation with that id" in out.stderr and "at least 50" in out.stderr
    both = convmon(url, "anchors", "load", str(tmp_path / "x.jsonl"), "--from-human-labels")
    assert both.returncode == 1 and "not both or neither" in both.stderr


def detected(n: int, seeds: int = 40) -> int:
    """Seeds in which a judge change flipping 30 % of an item's ``n`` anchors (judge noise 5 %, 15 baseline runs,
    5 after) is found at CONVMON_ANCHORS_ALPHA=0.01 over the 20 items of the rubric."""
    hits = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        human = (rng.uniform(size=n) < 0.3).astype(float)
        flip = rng.uniform(size=n) < 0.3
        runs = [np.where(rng.uniform(size=n) < 0.05, 1 - human, human) for _ in range(20)]
        runs[15:] = [np.where(flip, 1 - r, r) for r in runs[15:]]
        hits += evaluate_item(np.array(runs), human, rng.uniform(size=(20, n)), alpha=0.01 / 20).drifted
    return hits


def test_the_minimum_is_where_a_judge_change_starts_to_be_found() -> None:
    assert MIN_ANCHORS == 50
    assert (detected(40), detected(MIN_ANCHORS), detected(80)) == (22, 30, 38)  # the numbers the error cites
