"""Judged and distilled conversations written to a real SQLite label store the way the worker's sinks write them."""

from __future__ import annotations

import time
from typing import Any

import orjson

from distill.score_store import ScoreStore
from distill.store import LabelStore
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.score_codec import encode_score
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings, load_settings
from monitor.judge.redact import Redactor
from monitor.judge.reference import ConversationRef
from monitor.stages.labels import both

RUBRIC: RubricSet = load_rubric_set("spur-copilot", Settings().prompts_dir)
ITEM = "dsat.negative_feedback"
KEY = "k" * 32  # CONVMON_PII_REFERENCE_KEY of these tests


def settings(url: str, **overrides: Any) -> Settings:
    return load_settings(label_store_url=url, pii_reference_key=KEY, **overrides)


def store_judged(url: str, n: int, *, flagged_every: int = 2, now: float | None = None) -> list[str]:
    """``n`` judged conversations (every ``flagged_every``-th flagged on ITEM, with a reason quoting an e-mail
    address), written through the label sink's and the score sink's upserts; returns their ids."""
    now = time.time() if now is None else now
    labels = LabelStore(url, redact=Redactor([]).redact)
    scores = ScoreStore(labels, RUBRIC, redact=Redactor([]).redact, reference=ConversationRef(KEY.encode()))
    ids = []
    for k in range(n):
        cid = f"user{k}@example.com"
        yes = k % flagged_every == 0
        items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=yes and i.id == ITEM,
                            score=7.0 if yes and i.id == ITEM else 0.0,
                            explanation=f"the user complained about the answer, wrote {cid}"
                            if yes and i.id == ITEM else None) for i in RUBRIC.items]
        score = ScoreRecord(conversation_id=cid, scorer="llm", judge="stand-in", rubric_set=RUBRIC.id,
                            rubric_version=RUBRIC.version, model_version="judge-1", items=items,
                            R=-7.0 if yes else 0.0, scored_at=now - k, inclusion_probability=0.5,
                            sampled_by="hash", metadata={"app": "shop"})
        conversation = Conversation(conversation_id=cid, metadata={"app": "shop"}, turns=[
            Turn(index=0, role="user", text=f"this is wrong again, mail {cid}" if yes else "thanks, great"),
            Turn(index=1, role="assistant", text="sorry about that")])
        message = {"conversation": conversation.model_dump(mode="json"), "score": score.model_dump(mode="json")}
        both(labels.upsert_raw, scores.upsert_labels)([message])
        scores.upsert_raw([orjson.loads(encode_score(score, RUBRIC))])
        ids.append(cid)
    labels.close()
    return ids


def store_revisions(url: str, cid: str, yes_by_revision: list[set[str]], *, now: float | None = None) -> None:
    """The distilled model's records of ``cid``'s revisions 1, 2, ... (the i-th saying yes for the items in
    ``yes_by_revision[i]``), scored a minute apart, through the score sink's upsert as the scores topic holds them."""
    now = time.time() if now is None else now
    labels = LabelStore(url, redact=Redactor([]).redact)
    scores = ScoreStore(labels, RUBRIC, redact=Redactor([]).redact, reference=ConversationRef(KEY.encode()))
    for n, yes in enumerate(yes_by_revision, start=1):
        items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=i.id in yes,
                            probability=0.8 if i.id in yes else 0.2) for i in RUBRIC.items]
        score = ScoreRecord(conversation_id=cid, scorer="distilled", judge="hashing", rubric_set=RUBRIC.id,
                            rubric_version=RUBRIC.version, model_version="distilled-1", items=items, R=-1.0,
                            scored_at=now - 60 * (len(yes_by_revision) - n), revision=n, metadata={"app": "shop"})
        scores.upsert_raw([orjson.loads(encode_score(score, RUBRIC))])
    labels.close()
