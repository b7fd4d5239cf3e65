"""The score store keeps the judge's reason beside each yes verdict, redacted, whichever topic wrote the row last."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from distill.score_store import ScoreStore
from distill.store import LabelStore
from monitor.contracts.errors import ConfigError, LabelRejected
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import encode_score
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings, load_settings
from monitor.judge.redact import Redactor
from monitor.stages.labels import both

RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)
DSAT = next(i for i in RUBRIC.items if i.polarity == "dsat")


def judged(why: str | None) -> tuple[Conversation, ScoreRecord]:
    items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=i.id == DSAT.id,
                        score=8.0 if i.id == DSAT.id else 0.0, explanation=why if i.id == DSAT.id else None)
             for i in RUBRIC.items]
    score = ScoreRecord(conversation_id="conv-1", scorer="llm", judge="stand-in", rubric_set=RUBRIC.id,
                        rubric_version=RUBRIC.version, model_version="m1", items=items, R=-8.0)
    conversation = Conversation(conversation_id="conv-1", turns=[Turn(index=0, role="user", text="it failed")])
    return conversation, score


def test_a_label_gives_the_row_its_reason_and_the_scores_topic_keeps_it(tmp_path: Path) -> None:
    labels = LabelStore(f"sqlite:///{tmp_path / 'l.db'}")
    scores = ScoreStore(labels, RUBRIC, redact=Redactor([]).redact)
    conversation, score = judged("the user wrote bob@example.com twice")
    message = {"conversation": conversation.model_dump(mode="json"), "score": score.model_dump(mode="json")}
    write = both(labels.upsert_raw, scores.upsert_labels)
    assert write([message]) == 1
    [row] = scores.latest(DSAT.id, since=0, limit=5)
    assert row["explanation"] == "the user wrote [EMAIL] twice"
    scores.upsert_raw([orjson.loads(encode_score(score, RUBRIC))])  # the scores topic carries no reason
    [row] = scores.latest(DSAT.id, since=0, limit=5)
    assert row["explanation"] == "the user wrote [EMAIL] twice" and row["model_version"] == "m1"
    with pytest.raises(LabelRejected, match="not a judge label"):
        scores.upsert_labels([{"conversation": {}, "score": {"scorer": "llm"}}])
    labels.close()


def test_reasons_and_the_score_store_are_on_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CONVMON_JUDGE_EXPLANATIONS", "CONVMON_SCORE_STORE", "CONVMON_JUDGE_MODE"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.judge_explanations and settings.score_store
    assert settings.label_store_url.startswith("sqlite:///var/")
    monkeypatch.setenv("CONVMON_JUDGE_MODE", "likert")  # the default applies only where a mode can give a reason
    assert load_settings().judge_mode == "likert"
    monkeypatch.setenv("CONVMON_JUDGE_EXPLANATIONS", "true")
    with pytest.raises(ConfigError, match="judge_explanations needs judge_mode=spur"):
        load_settings()


def test_the_latest_revision_keeps_its_rows_and_a_late_earlier_one_changes_nothing(tmp_path: Path) -> None:
    labels = LabelStore(f"sqlite:///{tmp_path / 'l.db'}")
    scores = ScoreStore(labels, RUBRIC)
    _, first = judged(None)  # revision 1 said "yes" for DSAT
    other = next(i for i in RUBRIC.items if i.polarity == "dsat" and i.id != DSAT.id)
    second = first.model_copy(update={"revision": 2, "model_version": "m2", "items": [
        i.model_copy(update={"verdict": i.item_id == other.id, "score": 7.0 if i.item_id == other.id else 0.0})
        for i in first.items]})
    scores.upsert([first])
    assert [r["revision"] for r in scores.latest(DSAT.id, since=0, limit=5)] == [1]
    scores.upsert_raw([orjson.loads(encode_score(second, RUBRIC))])
    assert scores.latest(DSAT.id, since=0, limit=5) == []  # revision 2 no longer says yes for it
    [row] = scores.latest(other.id, since=0, limit=5)
    assert (row["revision"], row["model_version"]) == (2, "m2")
    scores.upsert([first])  # revision 1 again (a late verdict): stored on the topic, not over revision 2
    assert scores.latest(DSAT.id, since=0, limit=5) == []
    assert [r["revision"] for r in scores.latest(other.id, since=0, limit=5)] == [2]
    labels.close()
