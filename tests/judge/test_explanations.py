"""Judge explanations (``judge_explanations``): asked for in SPUR's JSON schema, validated strictly, carried to
the score record, and out only redacted (evaluation events, label store). Through the real test HTTP server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from prometheus_client import CollectorRegistry

from distill.store import LabelRecord
from monitor.contracts.errors import ConfigError, JudgeResponseError
from monitor.contracts.metrics import Metrics
from monitor.judge.redact import Redactor
from monitor.judge.strict import MAX_EXPLANATION
from monitor.stages.evaluations import EvaluationEvents
from tests.support.judge_wiring import judge_from, make_conversation, respond, sample

CONVERSATION = make_conversation("my email is bob@example.com and the export still fails", "Try again.",
                                 "that is wrong, it still fails")


def _item_schemas(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every answer shape the schema allows (an item with answer rules has one per ``anyOf`` branch)."""
    items = body["response_format"]["json_schema"]["schema"]["properties"].values()
    return [shape for item in items for shape in item.get("anyOf", [item])]


async def test_off_nothing_is_asked_or_kept(make_settings, rubric, metrics, server) -> None:
    judge = judge_from(make_settings(judge_explanations=False), rubric, metrics)
    record = await judge.score(CONVERSATION)
    assert all("why" not in s["properties"] for s in _item_schemas(server.requests[0]))
    assert '"why"' not in server.requests[0]["messages"][0]["content"]
    assert all(i.explanation is None for i in record.items)
    await judge.aclose()


async def test_explanations_reach_evaluation_events_and_the_label_store_redacted(make_settings, rubric, metrics,
                                                                                  server) -> None:
    judge = judge_from(make_settings(judge_explanations=True), rubric, metrics)
    record = await judge.score(CONVERSATION)  # the test server's reasons quote the user turns it was sent
    body = server.requests[0]
    assert all(s["required"] == ["answer", "score", "why"] and s["properties"]["why"] == {"type": "string"}
               for s in _item_schemas(body))
    assert f"at most {MAX_EXPLANATION} characters" in body["messages"][0]["content"]
    assert len(server.requests) == 1 and all("the export still fails" in (i.explanation or "") for i in record.items)
    # the prompt was redacted, but a judge can still write PII of its own (here: an address it makes up)
    server.script(respond(lambda obj, _: json.dumps({k: {**v, "why": "user bob@example.com is upset"}
                                                     for k, v in obj.items()})))
    record = await judge.score(CONVERSATION)
    assert record.items[0].explanation == "user bob@example.com is upset"  # kept as is inside the worker

    memory = InMemoryLogRecordExporter()
    events = EvaluationEvents.from_environment(scorers=["llm"], redact=Redactor().redact, exporter=memory,
                                              metrics=Metrics(CollectorRegistry()), queue_size=64)
    events.observe(record)
    events.shutdown()
    explanations = [d.log_record.attributes["gen_ai.evaluation.explanation"]  # type: ignore[index]
                    for d in memory.get_finished_logs()]
    assert len(explanations) == len(rubric.items)
    assert all("[EMAIL]" in e and "bob@example.com" not in e for e in explanations)

    stored = LabelRecord.from_score(CONVERSATION, record, redact=Redactor().redact)
    assert all(i.explanation and "[EMAIL]" in i.explanation for i in stored.items)
    assert "bob@example.com" not in stored.model_dump_json()
    await judge.aclose()


too_long = respond(lambda obj, _: json.dumps({k: {**v, "why": "x" * (MAX_EXPLANATION + 1)} for k, v in obj.items()}))
not_text = respond(lambda obj, _: json.dumps({k: {**v, "why": 7} for k, v in obj.items()}))
missing = respond(lambda obj, _: json.dumps({k: {a: b for a, b in v.items() if a != "why"} for k, v in obj.items()}))


@pytest.mark.parametrize(("bad", "problem", "said"), [
    (too_long, "bad_value", f"at most {MAX_EXPLANATION}"), (not_text, "bad_value", "why is not a string"),
    (missing, "missing_keys", "missing items in"),
])
async def test_explanations_are_validated_strictly(make_settings, rubric, metrics, server, bad, problem: str,
                                                   said: str) -> None:
    server.script(bad, bad)
    judge = judge_from(make_settings(judge_explanations=True), rubric, metrics)
    with pytest.raises(JudgeResponseError, match=said):
        await judge.score(CONVERSATION)
    assert sample(metrics, "convmon_judge_answers_rejected_total", problem=problem) == 2
    assert said in server.requests[1]["messages"][-1]["content"]  # the repair prompt named it
    await judge.aclose()


def test_explanations_need_spur_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.contracts.settings import load_settings

    monkeypatch.setenv("CONVMON_JUDGE_EXPLANATIONS", "true")
    assert load_settings().judge_explanations is True
    monkeypatch.setenv("CONVMON_JUDGE_MODE", "likert")
    with pytest.raises(ConfigError, match="judge_explanations needs judge_mode=spur"):
        load_settings()
