"""Every verdict names its judge; a change of any part of that is logged once and counted.

Through ``build_judge`` and the real test HTTP server, with the budget ledger's SQLite database as the book
of the last evaluator (so a rebuilt judge, like a restarted worker, compares with the previous run's).
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from distill.score_store import ScoreStore
from distill.store import LabelStore
from monitor import __version__
from monitor.contracts.errors import StoreError
from monitor.contracts.evaluator import PROVENANCE_FIELDS, Evaluator
from monitor.contracts.metrics import Metrics
from monitor.contracts.settings import REPO_ROOT
from monitor.judge.provenance import Provenance, endpoint_url, prompt_hash
from monitor.tools.stand_in_judge import answer
from tests.support.judge_wiring import API_KEY, judge_from, make_conversation, sample

HAPPY = make_conversation("Can you fix my code?", "Here is the fix.", "Thanks, that works perfectly!")
DATED = "gpt-4o-mini-2024-07-18"


def reports(model: str):
    """A behaviour: the stand-in's answer, with the response's ``model`` as a real endpoint may name it."""
    def behaviour(body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        text, _ = answer(body)
        return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": model,
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}}, {}
    return behaviour


def changes(metrics: Metrics) -> dict[str, float]:
    return {what: sample(metrics, "convmon_judge_provenance_changes_total", what=what) for what in PROVENANCE_FIELDS}


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "provenance changed" in r.getMessage()]


async def test_every_verdict_names_its_judge(make_settings, rubric, metrics, server) -> None:
    judge = judge_from(make_settings(), rubric, metrics)
    record = await judge.score(HAPPY)
    await judge.aclose()
    assert record.evaluator == Evaluator(
        model="gpt-4o-mini", endpoint=server.url,
        prompt=prompt_hash(REPO_ROOT / "prompts", "spur", make_settings().rubrics.domain_description),
        rubric=rubric.key, mode="spur", version=__version__)
    assert API_KEY not in record.model_dump_json()
    assert changes(metrics) == dict.fromkeys(PROVENANCE_FIELDS, 0.0)  # a first run has nothing to differ from


async def test_a_model_the_endpoint_reports_differently_is_logged_once_and_counted(
        make_settings, rubric, metrics, server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    judge = judge_from(make_settings(), rubric, metrics)
    first = await judge.score(HAPPY)
    server.script(reports(DATED), reports(DATED), reports(DATED))
    later = [await judge.score(HAPPY) for _ in range(3)]
    assert first.evaluator is not None and first.evaluator.model == "gpt-4o-mini"
    assert {r.evaluator.model for r in later if r.evaluator} == {DATED}
    assert changes(metrics)["model"] == 1 and sum(changes(metrics).values()) == 1
    assert logged(caplog) == [f"judge openai:gpt-4o-mini provenance changed: model 'gpt-4o-mini' -> '{DATED}' "
                              "(compare verdict rates across the change with care)"]
    await judge.score(HAPPY)  # back to the undated name: another change
    assert changes(metrics)["model"] == 2 and len(logged(caplog)) == 2
    await judge.aclose()


async def test_a_redeploy_with_other_prompts_is_counted_at_its_first_verdict(
        make_settings, rubric, server, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    before = Metrics(CollectorRegistry())
    judge = judge_from(make_settings(), rubric, before)
    await judge.score(HAPPY)
    await judge.aclose()
    prompts = tmp_path / "prompts"
    shutil.copytree(REPO_ROOT / "prompts", prompts)
    template = prompts / "templates" / "spur_estimation.txt"
    template.write_text(template.read_text() + "\nBe strict.\n")
    for run in range(2):  # the redeploy, then a restart of it: only the first differs from the run before
        metrics = Metrics(CollectorRegistry())
        judge = judge_from(make_settings(prompts_dir=prompts), rubric, metrics)
        await judge.score(HAPPY)
        await judge.score(HAPPY)
        await judge.aclose()
        assert changes(metrics) == {**dict.fromkeys(PROVENANCE_FIELDS, 0.0), "prompt": 1.0 - run}
    assert len(logged(caplog)) == 1 and "prompt 'sha256:" in logged(caplog)[0]
    assert prompt_hash(prompts, "spur") != prompt_hash(REPO_ROOT / "prompts", "spur")
    assert prompt_hash(prompts, "likert") == prompt_hash(REPO_ROOT / "prompts", "likert")  # not its template
    assert prompt_hash(prompts, "spur", "a travel agent") != prompt_hash(prompts, "spur", "a bank's assistant")


class Unreachable:
    def last(self, judge: str) -> Evaluator | None:
        raise StoreError("judge provenance: cannot read: connection refused")

    def remember(self, judge: str, evaluator: Evaluator) -> None:
        raise StoreError("judge provenance: cannot write: connection refused")


async def test_an_unreachable_book_costs_the_comparison_not_the_verdict(rubric, caplog) -> None:
    caplog.set_level(logging.WARNING)
    metrics = Metrics(CollectorRegistry())
    provenance = Provenance(metrics, judge="openai:m", endpoint="http://llm:8080/v1", prompt="sha256:0",
                            rubric=rubric, mode="spur", book=Unreachable())
    assert (await provenance.stamp(["m"])).model == "m"
    assert (await provenance.stamp(["m-2", "m"])).model == "m,m-2"  # a jury of two models
    assert changes(metrics)["model"] == 1
    assert any("not compared with earlier runs" in r.getMessage() for r in caplog.records)


def test_the_endpoint_keeps_no_credentials_query_or_fragment() -> None:
    assert endpoint_url("https://user:sk-secret@llm.internal:8443/v1/?api-key=sk-secret#frag") == (
        "https://llm.internal:8443/v1")
    assert endpoint_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    assert endpoint_url(None) == "https://api.openai.com/v1"


def test_the_score_store_keeps_each_rows_evaluator(tmp_path: Path, rubric) -> None:
    from tests.support.score_records import EVALUATOR, record

    url = f"sqlite:///{tmp_path / 'labels.db'}"
    with sa.create_engine(url).begin() as conn:  # a table from before the column: it is added on first use
        conn.execute(sa.text("CREATE TABLE convmon_score_items (conversation_id VARCHAR(256) NOT NULL, scorer "
                             "VARCHAR(16) NOT NULL, item_id VARCHAR(128) NOT NULL, polarity VARCHAR(16) NOT NULL, "
                             "value FLOAT, r FLOAT NOT NULL, judge VARCHAR(128) NOT NULL, model_version VARCHAR(128) "
                             "NOT NULL, rubric VARCHAR(200) NOT NULL, trace_id VARCHAR(32), span_id VARCHAR(16), "
                             "response_id VARCHAR(128), metadata JSON NOT NULL, scored_at FLOAT NOT NULL, "
                             "updated_at FLOAT NOT NULL, conversation_ref VARCHAR(32), "
                             "PRIMARY KEY (conversation_id, scorer, item_id))"))
    labels = LabelStore(url)
    store = ScoreStore(labels, rubric)
    now = time.time()
    judged = record(scorer="llm", judge="openai:gpt-4o-mini", evaluator=EVALUATOR, scored_at=now)
    older = record(conversation_id="c-old", scorer="llm", judge="openai:gpt-4o-mini", scored_at=now)
    store.upsert([judged, older])
    rows = store.latest(rubric.items[0].id, since=0, limit=10)
    assert {r["conversation_id"]: r["evaluator"] for r in rows} == {
        judged.conversation_id: EVALUATOR.model_dump(), "c-old": None}
    labels.close()


@pytest.mark.parametrize("url", ["sqlite", pytest.param("postgresql+psycopg://postgres@127.0.0.1:5432/test",
                                                        marks=pytest.mark.integration)])
def test_the_book_keeps_the_last_evaluator_per_judge(url: str, tmp_path: Path) -> None:
    import uuid

    from monitor.judge.sql_provenance import SqlProvenance

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'labels.db'}" if url == "sqlite" else url)
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    book = SqlProvenance(engine, table_prefix=prefix)
    first = Evaluator(model="m", endpoint="http://llm:8080/v1", prompt="sha256:0", rubric="r@1", mode="spur",
                      version="0.1.0")
    try:
        assert book.last("openai:m") is None
        book.remember("openai:m", first)
        book.remember("openai:m", first.model_copy(update={"model": "m-2"}))
        book.remember("jury:3", first)
        again = SqlProvenance(engine, table_prefix=prefix)  # another worker, or the next run
        assert again.last("openai:m") == first.model_copy(update={"model": "m-2"}) and again.last("jury:3") == first
        with engine.begin() as conn:  # a row this release cannot read is no baseline, not an error
            conn.execute(sa.text(f"UPDATE {prefix}judge_provenance SET evaluator = '{{\"model\": 1}}'"))
        assert again.last("jury:3") is None
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {prefix}judge_provenance"))
        engine.dispose()
