"""Evaluation events end to end, over OTLP/HTTP and OTLP/gRPC, with the receiver down and then up.

A chat app traced by the real OpenTelemetry SDK publishes its spans SDK-encoded on Kafka (unkeyed, several
conversations per message). A worker scores every conversation with the distilled model and sends every one
to a judge that cannot be reached. Its evaluation events go to a real OTLP receiver (an HTTP server or a
grpcio server, decoding with opentelemetry-proto) that is down for the first batch of conversations and up
for the second. Shown: one 0-1 scale per evaluation name, evaluator provenance, the judged app's service.name
on the resource, error events for the failed judge calls, and export counters that move while the receiver
is down and account for every event.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse

from monitor.runtime.broker import free_port
from monitor.runtime.scrape import by_label, total
from monitor.stages.otlp import any_value
from monitor.tools.otel_traffic import Chat, GenAiApp, conversation_texts
from tests.support.content_store import ANSWER, HISTORY, TOKEN, Store, spans_by_reference
from tests.support.otlp import otlp_worker, produce_unkeyed, unreferenced
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration
N = 3  # conversations per batch
Event = tuple[dict[str, Any], dict[str, Any], str]  # resource attributes, record attributes, span ref


def events_of(request: ExportLogsServiceRequest) -> list[Event]:
    return [({kv.key: any_value(kv.value) for kv in rl.resource.attributes},
             {kv.key: any_value(kv.value) for kv in r.attributes}, f"{r.trace_id.hex()}-{r.span_id.hex()}")
            for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records]


class Receiver:
    """A real OTLP logs endpoint on a fixed port, started when the test says."""

    def __init__(self, protocol: str) -> None:
        self.protocol, self.port = protocol, free_port()
        self.events: list[Event] = []
        self.lock = threading.Lock()
        self._stop: Any = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}" + ("/v1/logs" if self.protocol == "http/protobuf" else "")

    def keep(self, request: ExportLogsServiceRequest) -> None:
        with self.lock:
            self.events += events_of(request)

    def start(self) -> None:
        if self.protocol == "grpc":
            receiver = self

            class Logs(logs_service_pb2_grpc.LogsServiceServicer):
                def Export(self, request: ExportLogsServiceRequest, context: Any) -> ExportLogsServiceResponse:  # noqa: N802
                    receiver.keep(request)
                    return ExportLogsServiceResponse()

            server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
            logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
            server.add_insecure_port(f"127.0.0.1:{self.port}")
            server.start()
            self._stop = lambda: server.stop(grace=None)
            return
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                request = ExportLogsServiceRequest()
                request.ParseFromString(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                receiver.keep(request)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        http = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=http.serve_forever, daemon=True).start()
        self._stop = lambda: (http.shutdown(), http.server_close())

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()


def outcomes(samples: list[tuple[str, dict[str, str], float]]) -> dict[str, float]:
    return by_label(samples, "convmon_evaluation_events_total", "outcome")


@pytest.mark.parametrize("protocol", ["http/protobuf", pytest.param("grpc", marks=pytest.mark.long)])
def test_evaluation_events_scales_provenance_errors_and_counters(broker: str, make_settings, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 protocol: str) -> None:
    settings, rubric = otlp_worker(make_settings, broker, "otlp_traces", "otlp_proto")
    settings = settings.model_copy(update={  # every conversation to a judge nobody answers, both scorers' events
        "sample_rate": 1.0, "otel_evaluation_scorers": ["llm", "distilled"],
        "openai_base_url": f"http://127.0.0.1:{free_port()}/v1", "judge_max_retries": 0, "judge_timeout_s": 2.0})
    app = GenAiApp(service="shop-bot")
    batches = [[Chat(f"ev-{protocol}-{b}-{i}", conversation_texts(1, f"{b}{i}")) for i in range(N)] for b in (0, 1)]
    judged: dict[str, str] = {}
    messages = []
    for chats in batches:  # one message per batch, SDK-encoded
        judged.update({c: refs[-1] for c, refs in app.trace(chats).items()})
        messages.append(app.take_traces("otlp_proto"))
    receiver = Receiver(protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "2")  # give up on a down receiver in 2 s, not 10
    monkeypatch.setenv("OTEL_BLRP_SCHEDULE_DELAY", "200")
    per_conversation = 2 * len(rubric.items)  # the distilled verdicts and the judge's error events
    try:
        with WorkerProcess(settings, tmp_path / "worker.log") as worker:
            produce_unkeyed(broker, settings.topic("events"), [messages[0]])

            def failed_events() -> float:
                return outcomes(worker.samples()).get("export_failed", 0.0)

            wait_until(lambda: failed_events() >= N * per_conversation, timeout=120,
                       message="the first batch's events counted as failed while the receiver is down")
            down = outcomes(worker.samples())
            receiver.start()
            produce_unkeyed(broker, settings.topic("events"), [messages[1]])
            wait_until(lambda: len(receiver.events) >= N * per_conversation, timeout=120,
                       message="the second batch's events at the receiver")
            wait_until(lambda: outcomes(worker.samples()).get("exported", 0) >= N * per_conversation, timeout=30,
                       message="exported counted")
            samples = worker.samples()
            assert worker.alive(), worker.log()
    finally:
        receiver.stop()

    # counters: the down receiver's events are export_failed, the rest exported, every event accounted for
    assert down["emitted"] == down["export_failed"] == N * per_conversation and down["exported"] == 0
    up = outcomes(samples)
    assert up["emitted"] == 2 * N * per_conversation
    assert (up["exported"], up["export_failed"], up["queue_full"], up["shutdown"]) == (
        N * per_conversation, N * per_conversation, 0, 0)
    assert total(samples, "convmon_evaluation_events_queued") == 0
    assert by_label(samples, "convmon_judge_nonresponse_total", "reason").get("judge_unavailable") == 2 * N

    second = {c.conversation_id for c in batches[1]}
    by_conversation: dict[str, list[Event]] = defaultdict(list)
    for event in receiver.events:
        by_conversation[unreferenced(event[1]["gen_ai.conversation.id"], judged)].append(event)
    assert set(by_conversation) == second  # the first batch was never delivered
    for cid, events in by_conversation.items():
        assert all(span == judged[cid] for _, _, span in events)  # parented to the judged span
        assert all(res["service.name"] == "shop-bot" and res["convmon.evaluator.service.name"] == "convmon"
                   for res, _, _ in events)  # the judged app's resource
        scorers = Counter(a["gen_ai.evaluation.evaluator.id"] for _, a, _ in events)
        assert scorers == {"convmon.distilled": len(rubric.items), "convmon.llm": len(rubric.items)}
        for _, a, _ in events:
            if a["gen_ai.evaluation.evaluator.id"] == "convmon.distilled":  # one 0-1 scale, polarity-aware label
                assert 0.0 <= a["gen_ai.evaluation.score.value"] <= 1.0 and "error.type" not in a
                assert a["gen_ai.evaluation.score.label"] in ("good", "bad", "neutral")
                assert a["gen_ai.evaluation.evaluator.version"] and "gen_ai.evaluation.evaluator.type" not in a
            else:  # the judge failed: an error event per item, no score
                assert a["error.type"] == "judge_unavailable" and "gen_ai.evaluation.score.value" not in a
                assert (a["gen_ai.evaluation.evaluator.type"], a["gen_ai.evaluation.evaluator.version"]) == (
                    "llm_judge", settings.judge_model)
            assert a["convmon.rubric_set"] == rubric.key
        names = sorted(a["gen_ai.evaluation.name"] for _, a, _ in events)
        assert names == sorted(rubric.item_ids * 2)


@pytest.mark.long  # a minute; tests/stages/test_content_refs.py covers the resolver in the default selection
def test_content_by_reference_is_fetched_scored_and_evaluated(broker: str, make_settings, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans that carry ``gen_ai.*.messages_ref`` instead of text: the worker fetches the messages from a real
    HTTP content store (allow-listed host, credentials from settings), scores them and evaluates the span."""
    store = Store()
    settings, rubric = otlp_worker(make_settings, broker, "otlp_traces", "otlp_proto")
    settings = settings.model_copy(update={
        "otlp_content_resolver": "http", "otlp_content_allowed_hosts": ["127.0.0.1"],
        "otlp_content_url_template": f"http://127.0.0.1:{store.port}/store/{{bucket}}/{{key}}"})
    calls = []
    for i in range(N):
        store.objects[f"/store/bucket/r{i}/in.json"] = orjson.dumps(HISTORY)
        store.objects[f"/store/bucket/r{i}/out.json"] = orjson.dumps(ANSWER)
        calls.append((f"ref-{i}", f"gs://bucket/r{i}/in.json", f"gs://bucket/r{i}/out.json"))
    app = GenAiApp()
    raw = spans_by_reference(app, calls)
    receiver = Receiver("http/protobuf")
    receiver.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_BLRP_SCHEDULE_DELAY", "200")
    try:
        with WorkerProcess(settings, tmp_path / "worker.log",
                           extra_env={"CONVMON_OTLP_CONTENT_AUTHORIZATION": TOKEN}) as worker:
            produce_unkeyed(broker, settings.topic("events"), [raw])
            wait_until(lambda: total(worker.samples(), "convmon_conversations_scored_total", scorer="distilled") >= N,
                       timeout=120, message="every conversation fetched by reference and scored")
            wait_until(lambda: len(receiver.events) >= N * len(rubric.items), timeout=30,
                       message="evaluation events at the receiver")
            samples = worker.samples()
            assert worker.alive(), worker.log()
    finally:
        receiver.stop()
        store.stop()
    assert by_label(samples, "convmon_otlp_content_fetches_total", "outcome") == {"fetched": N}
    assert total(samples, "convmon_otlp_records_total", outcome="no_content") == 0
    assert {auth for _, auth in store.requests} == {TOKEN}  # from settings, never from the spans
    assert {unreferenced(a["gen_ai.conversation.id"], [c for c, _, _ in calls]) for _, a, _ in receiver.events} == {
        c for c, _, _ in calls}
    assert all(len(span) == 49 and span[33:] != "0" * 16 for _, _, span in receiver.events)  # parented to the call
