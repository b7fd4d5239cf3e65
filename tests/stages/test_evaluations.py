"""Evaluation events through the real SDK LoggerProvider and batch processor (in-memory or failing exporters in
place of OTLP, which tests/integration/test_otlp_e2e.py drives over HTTP and gRPC)."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Sequence

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, LogRecordExporter, LogRecordExportResult
from prometheus_client import CollectorRegistry

from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings
from monitor.judge.redact import Redactor
from monitor.runtime.wiring import service_dimension
from monitor.stages.evaluations import EvaluationEvents
from monitor.stages.export import Exporter
from monitor.stages.otel_export import otlp_exporter, protocol
from tests.support.hot_path import FailingJudge, complaint_conversation, judge_stage, judged
from tests.support.otel_events import events, finished

RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)
SAT = next(i for i in RUBRIC.items if i.polarity == "sat")
DSAT = next(i for i in RUBRIC.items if i.polarity == "dsat")
SPAN = "ab" * 16 + "-" + "cd" * 8



def llm_record(span: str | None = SPAN, response_id: str | None = "resp-1", **extra: object) -> ScoreRecord:
    items = [ItemResult(item_id=SAT.id, polarity="sat", verdict=True, score=7.0,
                        explanation="user wrote bob@example.com twice"),
             ItemResult(item_id=DSAT.id, polarity="dsat", verdict=True, score=9.0),
             ItemResult(item_id="dsat.other", polarity="dsat", verdict=False, score=0.0),
             ItemResult(item_id="sat.other", polarity="sat", uncertain=True)]
    return ScoreRecord(conversation_id="c1", scorer="llm", judge="openai:gpt-4o-mini", rubric_set=RUBRIC.id,
                       rubric_version=RUBRIC.version, model_version="gpt-4o-mini", items=items, R=0.0, span=span,
                       response_id=response_id, **extra)  # type: ignore[arg-type]


def distilled_record(metadata: dict[str, str] | None = None) -> ScoreRecord:
    items = [ItemResult(item_id=SAT.id, polarity="sat", probability=0.83, verdict=True),
             ItemResult(item_id=DSAT.id, polarity="dsat", probability=0.02, verdict=False)]
    return ScoreRecord(conversation_id="c2", scorer="distilled", judge="openai:gpt-4o-mini", rubric_set=RUBRIC.id,
                       rubric_version=RUBRIC.version, model_version="d-7", items=items, R=0.0,
                       metadata=metadata or {})



def counts(metrics: Metrics) -> dict[str, float]:
    return {s.labels["outcome"]: s.value for f in metrics.registry.collect() if f.name == "convmon_evaluation_events"
            for s in f.samples if s.name.endswith("_total")}


def test_one_scale_per_name_polarity_aware_labels_and_provenance() -> None:
    memory = InMemoryLogRecordExporter()
    ev, metrics = events(memory)
    ev.observe(llm_record())
    ev.observe(distilled_record())
    ev.shutdown()  # flushes the batch processor
    logs = [r.log_record for r in finished(memory)]
    assert len(logs) == 6 and all(r.event_name == "gen_ai.evaluation.result" for r in logs)
    by = {(r.attributes["convmon.scorer"], r.attributes["gen_ai.evaluation.name"]): dict(r.attributes or {})
          for r in logs}
    # every score value is P(yes) in 0-1; the judge's 0-10 score rides in convmon.spur_score
    values = [a["gen_ai.evaluation.score.value"] for a in by.values() if "gen_ai.evaluation.score.value" in a]
    assert len(values) == 5 and all(0.0 <= v <= 1.0 for v in values)
    sat, dsat = by[("llm", SAT.id)], by[("llm", DSAT.id)]
    assert (sat["gen_ai.evaluation.score.value"], sat["convmon.spur_score"]) == (1.0, 7.0)
    assert (dsat["gen_ai.evaluation.score.value"], dsat["convmon.spur_score"]) == (1.0, 9.0)
    assert by[("distilled", SAT.id)]["gen_ai.evaluation.score.value"] == 0.83
    assert "convmon.spur_score" not in by[("distilled", SAT.id)]
    # the label says which way is bad: a yes on a DSAT item is bad, on a SAT item good, a no neutral
    assert (sat["gen_ai.evaluation.score.label"], dsat["gen_ai.evaluation.score.label"]) == ("good", "bad")
    assert by[("llm", "dsat.other")]["gen_ai.evaluation.score.label"] == "neutral"
    uncertain = by[("llm", "sat.other")]
    assert uncertain["gen_ai.evaluation.score.label"] == "uncertain"
    assert "gen_ai.evaluation.score.value" not in uncertain
    assert (sat["convmon.verdict"], sat["convmon.polarity"], sat["convmon.score.bad_when"]) == ("yes", "sat", "low")
    assert dsat["convmon.score.bad_when"] == "high"
    # provenance: semantic-conventions-genai PR #359's names, convmon.* for the rest
    assert (sat["gen_ai.evaluation.evaluator.id"], sat["gen_ai.evaluation.evaluator.type"],
            sat["gen_ai.evaluation.evaluator.version"]) == ("convmon.llm", "llm_judge", "gpt-4o-mini")
    distilled = by[("distilled", SAT.id)]
    assert (distilled["gen_ai.evaluation.evaluator.id"], distilled["gen_ai.evaluation.evaluator.version"]) == (
        "convmon.distilled", "d-7")
    assert "gen_ai.evaluation.evaluator.type" not in distilled
    assert sat["convmon.judge"] == "openai:gpt-4o-mini" and sat["convmon.rubric_set"] == RUBRIC.key
    assert sat["gen_ai.evaluation.explanation"] == "user wrote [EMAIL] twice"
    assert counts(metrics) == {"emitted": 6, "exported": 6, "export_failed": 0, "queue_full": 0, "shutdown": 0}


def test_events_are_parented_or_carry_the_response_id_and_filtered_by_scorer() -> None:
    memory = InMemoryLogRecordExporter()
    ev, _ = events(memory, scorers=["llm"])
    ev.observe(llm_record())
    ev.observe(llm_record(span=None, response_id="resp-2"))
    ev.observe(distilled_record())  # not a configured scorer
    ev.shutdown()
    logs = [r.log_record for r in finished(memory)]
    assert len(logs) == 8
    parented, unparented = logs[:4], logs[4:]
    assert all((r.trace_id, r.span_id) == (int("ab" * 16, 16), int("cd" * 8, 16)) for r in parented)
    assert all(r.span_id == 0 and r.attributes["gen_ai.response.id"] == "resp-2" for r in unparented)


def test_calibrated_satisfaction_is_its_own_evaluation() -> None:
    memory = InMemoryLogRecordExporter()
    ev, _ = events(memory)
    ev.observe(llm_record(satisfaction=0.31))
    ev.shutdown()
    names = {r.log_record.attributes["gen_ai.evaluation.name"]: r.log_record.attributes for r in finished(memory)}
    assert names["convmon.satisfaction"]["gen_ai.evaluation.score.value"] == 0.31


def test_judge_failure_gives_error_events_per_item_parented_to_the_judged_span() -> None:
    memory = InMemoryLogRecordExporter()
    ev, _ = events(memory)
    turns = [Turn(index=0, role="user", text="hi"), Turn(index=1, role="assistant", text="hello", span=SPAN,
                                                         response_id="resp-9")]
    conversation = Conversation(conversation_id="c9", turns=turns, metadata={"app": "shop-bot"})
    ev.failed(conversation, "judge_unavailable")
    ev.shutdown()
    logs = finished(memory)
    assert len(logs) == len(RUBRIC.items)
    for entry in logs:
        a = entry.log_record.attributes or {}
        assert a["error.type"] == "judge_unavailable" and a["gen_ai.conversation.id"] == "c9"
        assert "gen_ai.evaluation.score.value" not in a and a["gen_ai.evaluation.evaluator.id"] == "convmon.llm"
        assert entry.log_record.span_id == int("cd" * 8, 16)
        assert entry.resource.attributes["service.name"] == "shop-bot"
    assert sorted(e.log_record.attributes["gen_ai.evaluation.name"] for e in logs) == sorted(RUBRIC.item_ids)


def test_resource_carries_the_judged_apps_service_name() -> None:
    memory = InMemoryLogRecordExporter()
    ev, _ = events(memory, scorers=["distilled"])
    ev.observe(distilled_record({"app": "shop-bot"}))
    ev.observe(distilled_record({}))  # no app known: convmon's own resource
    ev.shutdown()
    resources = [dict(r.resource.attributes) for r in finished(memory)]
    assert resources[0]["service.name"] == "shop-bot"
    assert resources[0]["convmon.evaluator.service.name"] == "convmon"
    assert resources[-1]["service.name"] == "convmon" and "convmon.evaluator.service.name" not in resources[-1]
    default = Settings()
    assert service_dimension(default) == "app"  # otlp_dimension_attributes: app <- service.name
    assert service_dimension(Settings(metric_dimensions=["locale"])) is None


class Failing(LogRecordExporter):
    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        return LogRecordExportResult.FAILURE

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class Stalled(Failing):
    """An endpoint that hangs until released: the queue fills meanwhile."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.release.wait(20)
        return LogRecordExportResult.SUCCESS


def test_failed_exports_are_counted() -> None:
    ev, metrics = events(Failing(), scorers=["llm"])
    ev.observe(llm_record())
    ev.shutdown()
    assert counts(metrics) == {"emitted": 4, "exported": 0, "export_failed": 4, "queue_full": 0, "shutdown": 0}


def test_a_full_queue_drops_and_counts_every_event_it_refuses() -> None:
    stalled = Stalled()
    ev, metrics = events(stalled, scorers=["llm"], queue_size=10)
    for _ in range(10):  # 40 events, 10 fit while the endpoint hangs (an export may hold a batch meanwhile)
        ev.observe(llm_record())
    stalled.release.set()
    ev.shutdown()
    got = counts(metrics)
    assert got["emitted"] == 40 and got["queue_full"] >= 30 - 10
    assert got["exported"] + got["queue_full"] == 40 and got["export_failed"] == got["shutdown"] == 0
    gauges = {f.name: f.samples[0].value for f in metrics.registry.collect()
              if f.name.startswith("convmon_evaluation_events_queue")}
    assert gauges == {"convmon_evaluation_events_queued": 0, "convmon_evaluation_events_queue_capacity": 10}


def test_protocol_from_the_standard_variables() -> None:
    assert protocol({}) == "http/protobuf"
    assert protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == "grpc"
    assert protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf"}) \
        == "http/protobuf"
    with pytest.raises(ConfigError, match="http/json"):
        protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert isinstance(otlp_exporter({}), HttpExporter)
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcExporter

    assert isinstance(otlp_exporter({"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "grpc"}), GrpcExporter)


def test_grpc_without_the_extra_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc._log_exporter", None)  # not installed
    with pytest.raises(ConfigError, match=r"pip install 'convmon\[grpc\]'") as err:
        otlp_exporter({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert "\n" not in str(err.value)


def test_the_judge_stage_reports_a_failed_judge_call_as_error_events() -> None:
    """monitor/stages/judging.py's non-response path calls the exporter's failure hook, as the worker wires it."""
    memory = InMemoryLogRecordExporter()
    ev, metrics = events(memory)
    exporter = Exporter(metrics, dimensions=[], cap=5, rubric=RUBRIC)
    exporter.evaluation_failures = ev.failed
    stage, _ = judge_stage(FailingJudge())
    stage.exporter, stage.metrics = exporter, metrics
    raw = orjson.dumps(complaint_conversation("f1").model_dump(mode="json"))
    out = asyncio.run(judged(stage, raw, b"f1", 0, []))
    ev.shutdown()
    assert [d.reason for d in out.dead] == ["judge_http_error"] and out.scores == []  # dead-lettered as before
    logs = [r.log_record.attributes or {} for r in finished(memory)]
    assert len(logs) == len(RUBRIC.items)
    assert {(a["gen_ai.conversation.id"], a["error.type"]) for a in logs} == {("f1", "judge_http_error")}


def test_the_conversation_id_goes_out_as_its_reference_when_asked() -> None:
    """The worker's default (``otel_evaluation_conversation_id=reference``): an id such as an e-mail address
    never leaves in an export; the keyed reference does, which `convmon forget` and the score store resolve."""
    from monitor.judge.reference import ConversationRef

    ref = ConversationRef(b"a-key-of-at-least-16-bytes")
    memory = InMemoryLogRecordExporter()
    metrics = Metrics(CollectorRegistry())
    ev = EvaluationEvents.from_environment(scorers=("llm",), redact=Redactor().redact, metrics=metrics,
                                           queue_size=64, exporter=memory, rubric=RUBRIC, conversation_ref=ref)
    ev.observe(llm_record().model_copy(update={"conversation_id": "jane.doe@example.com"}))
    ev.failed(Conversation(conversation_id="jane.doe@example.com", turns=[Turn(index=0, role="user", text="hi")]),
              "judge_unavailable")
    ev.shutdown()
    ids = {(entry.log_record.attributes or {})["gen_ai.conversation.id"] for entry in finished(memory)}
    assert ids == {ref("jane.doe@example.com")}


def test_a_judge_records_evaluator_goes_out_under_the_evaluator_prefix() -> None:
    from monitor.contracts.evaluator import Evaluator

    memory = InMemoryLogRecordExporter()
    ev, _ = events(memory)
    evaluator = Evaluator(model="gpt-4o-mini-2024-07-18", endpoint="https://api.openai.com/v1",
                          prompt="sha256:0123", rubric=RUBRIC.key, mode="spur", version="0.1.0")
    ev.observe(llm_record(evaluator=evaluator))
    ev.observe(distilled_record())
    ev.shutdown()
    by_scorer = {r.log_record.attributes["convmon.scorer"]: dict(r.log_record.attributes or {})
                 for r in finished(memory)}
    prefix = "gen_ai.evaluation.evaluator."
    assert {k: v for k, v in by_scorer["llm"].items() if k.startswith(prefix)} == {
        f"{prefix}id": "convmon.llm", f"{prefix}type": "llm_judge", f"{prefix}version": "gpt-4o-mini",
        f"{prefix}model": "gpt-4o-mini-2024-07-18", f"{prefix}endpoint": "https://api.openai.com/v1",
        f"{prefix}prompt.hash": "sha256:0123", f"{prefix}rubric": RUBRIC.key, f"{prefix}mode": "spur",
        f"{prefix}convmon_version": "0.1.0"}
    assert f"{prefix}model" not in by_scorer["distilled"]  # a distilled record has no judge
