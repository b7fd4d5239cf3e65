"""Evaluation events through the real SDK LoggerProvider (an in-memory exporter in place of OTLP/HTTP)."""

from __future__ import annotations

from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings
from monitor.judge.redact import Redactor
from monitor.stages.evaluations import EvaluationEvents

RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)


def record(scorer: str, span: str | None, response_id: str | None) -> ScoreRecord:
    items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=True, score=7.0,
                        explanation="user wrote bob@example.com twice") for i in RUBRIC.items[:2]]
    return ScoreRecord(conversation_id="c1", scorer=scorer, judge="openai:gpt-4o-mini", rubric_set=RUBRIC.id,  # type: ignore[arg-type]
                       rubric_version=RUBRIC.version, model_version="m", items=items, R=0.0, span=span,
                       response_id=response_id)


def test_events_are_parented_redacted_and_filtered_by_scorer() -> None:
    memory = InMemoryLogRecordExporter()
    events = EvaluationEvents.from_environment(scorers=["llm"], redact=Redactor().redact, exporter=memory)
    events.observe(record("llm", "ab" * 16 + "-" + "cd" * 8, "resp-1"))
    events.observe(record("llm", None, "resp-2"))
    events.observe(record("distilled", None, None))  # not a configured scorer
    events.shutdown()  # flushes the batch processor
    logs = [d.log_record for d in memory.get_finished_logs()]
    assert len(logs) == 4 and all(r.event_name == "gen_ai.evaluation.result" for r in logs)
    parented, unparented = logs[:2], logs[2:]
    assert all((r.trace_id, r.span_id) == (int("ab" * 16, 16), int("cd" * 8, 16)) for r in parented)
    assert all(r.span_id == 0 and r.attributes["gen_ai.response.id"] == "resp-2" for r in unparented)
    first = logs[0].attributes
    assert first["gen_ai.evaluation.name"] == RUBRIC.items[0].id and first["gen_ai.evaluation.score.value"] == 7.0
    assert first["gen_ai.evaluation.score.label"] == "yes"
    assert first["gen_ai.evaluation.explanation"] == "user wrote [EMAIL] twice"
