"""OTLP GenAI telemetry in, evaluation events and exemplars out, through a real broker, worker and Prometheus.

A chat app traced by the real OpenTelemetry SDK publishes its spans as the Collector's kafka exporter
does: unkeyed ``ExportTraceServiceRequest`` messages (OTLP encoders of the SDK), several conversations
per message, each later call repeating the history. Every conversation must be sessionized and scored
exactly once; its verdicts must reach an OTLP/HTTP receiver as ``gen_ai.evaluation.result`` log events
parented to the judged span; the verdict counters must carry exemplars a real Prometheus stores.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aiokafka import AIOKafkaProducer
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import Settings
from monitor.judge.reference import ConversationRef, is_reference
from monitor.runtime.app import topic_names
from monitor.runtime.broker import ensure_topics, free_port
from monitor.runtime.scrape import by_label, total
from monitor.stages.otlp import any_value
from monitor.tools.otel_traffic import Chat, GenAiApp, conversation_texts
from tests.support.model_fixtures import publish_distilled_model
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration
N = 6  # conversations, all in the same messages
REFERENCE_KEY = "otlp-e2e-reference-key-0123456789"
REF = ConversationRef(REFERENCE_KEY.encode())  # evaluation events carry the id's reference, never the id


def unreferenced(reference: str, ids: Any) -> str:
    """The conversation id (one of ``ids``) whose reference an evaluation event carries."""
    found = {REF(cid): cid for cid in ids}
    assert reference in found, f"{reference!r} is not the reference of a known conversation id"
    return found[reference]


class OtlpReceiver:
    """An OTLP/HTTP logs endpoint: decodes every request with opentelemetry-proto and keeps the records."""

    def __init__(self) -> None:
        self.records: list[LogRecord] = []
        self.bodies: list[bytes] = []  # the requests as sent (resource attributes included), to grep
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportLogsServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    receiver.bodies.append(body)
                    receiver.records += [r for rl in request.resource_logs for sl in rl.scope_logs
                                         for r in sl.log_records]
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/logs"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def produce_unkeyed(bootstrap: str, topic: str, messages: list[bytes]) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=4 << 20)
        await producer.start()
        try:
            for raw in messages:
                await producer.send(topic, key=None, value=raw)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(run())


def prometheus_exemplars(workdir: Path, target: str, query: str) -> list[dict[str, Any]]:
    """Scrape ``target`` with a real Prometheus (exemplar storage on, OpenMetrics) and query its exemplars."""
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.fail("prometheus not found: install the Debian package `prometheus`")
    port = free_port()
    config = {"global": {"scrape_interval": "1s"},
              "scrape_configs": [{"job_name": "convmon", "static_configs": [{"targets": [target]}]}]}
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    with (workdir / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen([exe, f"--config.file={workdir / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                                 "--enable-feature=exemplar-storage"], stdout=log, stderr=subprocess.STDOUT)
    found: list[dict[str, Any]] = []
    try:
        def stored() -> bool:
            now = time.time()
            body = httpx.get(f"http://127.0.0.1:{port}/api/v1/query_exemplars",
                             params={"query": query, "start": now - 600, "end": now + 60}, timeout=5).json()
            found[:] = body.get("data") or []
            return bool(found)

        wait_until(stored, timeout=40, message="exemplars in Prometheus")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    return found


def otlp_worker(make_settings: Any, broker: str, input_format: str, encoding: str) -> tuple[Settings, RubricSet]:
    """Settings for a worker reading OTLP input and emitting distilled evaluation events, its model published and
    its topics created."""
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=0.0, idle_timeout_s=3.0, registry_poll_s=1.0,
                             input_format=input_format, otlp_encoding=encoding, otel_evaluation_events=True,
                             otel_evaluation_scorers=["distilled"], pii_reference_key=REFERENCE_KEY)
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    publish_distilled_model(settings, rubric)
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    return settings, rubric


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_otlp_traces_to_scores_evaluation_events_and_exemplars(broker: str, make_settings, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch, encoding: str) -> None:
    settings, rubric = otlp_worker(make_settings, broker, "otlp_traces", encoding)
    app = GenAiApp()
    chats = [Chat(f"otlp-{encoding}-{i}", conversation_texts(2, f"{encoding}{i}")) for i in range(N)]
    first = app.trace(chats, calls=[0])
    message_1 = app.take_traces(encoding)  # every conversation's first call, one message
    second = app.trace(chats, calls=[1])
    message_2 = app.take_traces(encoding)  # the second calls, repeating the first ones' history
    judged = {c.conversation_id: second[c.conversation_id][0] for c in chats}
    assert all(first[c] != judged[c] for c in judged)

    receiver = OtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_BLRP_SCHEDULE_DELAY", "200")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "convmon-test")
    try:
        with WorkerProcess(settings, tmp_path / "worker.log") as worker:
            produce_unkeyed(broker, settings.topic("events"), [message_1, message_2, b"\x0a\xff not otlp"])
            wait_until(lambda: total(worker.samples(), "convmon_conversations_scored_total", scorer="distilled") >= N,
                       timeout=120, message="every conversation scored")
            expected_events = N * len(rubric.items)
            wait_until(lambda: len(receiver.records) >= expected_events, timeout=30,
                       message="evaluation events at the OTLP receiver")
            time.sleep(2)  # anything extra (a double count) would arrive now
            samples = worker.samples()
            openmetrics = httpx.get(worker.url, headers={"Accept": "application/openmetrics-text; version=1.0.0"},
                                    timeout=5)
            exemplars = prometheus_exemplars(tmp_path, f"127.0.0.1:{worker.port}", "convmon_rubric_verdicts_total")
            assert worker.alive(), worker.log()
    finally:
        receiver.stop()

    assert by_label(samples, "convmon_conversations_scored_total", "scorer") == {"distilled": N}
    assert by_label(samples, "convmon_conversations_finished_total", "end_reason") == {"idle": N}
    assert total(samples, "convmon_duplicate_scores_total") == 0
    # The two unkeyed messages land on different partitions, so their re-keyed turns may arrive in either order:
    # the user turn 0 is always a repeat; the history copy of answer 1 is one only if the answer (with its span)
    # came first, else the answer replaces it. Either way each turn is stored once, and the span wins.
    repeated = total(samples, "convmon_repeated_turns_total")
    assert N <= repeated <= 2 * N
    assert total(samples, "convmon_otlp_records_total", outcome="turns") == 2 * N
    assert total(samples, "convmon_otlp_records_total", outcome="not_genai") == 2 * N  # the HTTP server spans
    assert by_label(samples, "convmon_dead_letters_total", "reason") == {"malformed_otlp": 1}
    # decoded from OTLP: 2 + 4 per conversation
    assert total(samples, "convmon_events_total", kind="turn") == 6 * N  # once, where decoded (not again re-keyed)

    # Verdicts as OTLP log events, parented to the span of each conversation's last answer.
    by_conversation: dict[str, list[LogRecord]] = defaultdict(list)
    for record in receiver.records:
        attrs = {kv.key: any_value(kv.value) for kv in record.attributes}
        assert record.event_name == "gen_ai.evaluation.result"
        cid = unreferenced(attrs["gen_ai.conversation.id"], judged)
        by_conversation[cid].append(record)
        trace_hex, span_hex = judged[cid].split("-")
        assert (record.trace_id.hex(), record.span_id.hex()) == (trace_hex, span_hex)
        assert attrs["gen_ai.response.id"] == f"chatcmpl-{cid}-1"
        assert attrs["gen_ai.evaluation.score.label"] in ("good", "bad", "neutral")  # polarity-aware
        assert attrs["convmon.verdict"] in ("yes", "no")
        assert 0.0 <= attrs["gen_ai.evaluation.score.value"] <= 1.0 and attrs["convmon.scorer"] == "distilled"
    assert sorted(by_conversation) == sorted(judged)
    for records in by_conversation.values():  # one event per rubric item, once
        names = sorted(any_value(kv.value) for r in records for kv in r.attributes
                       if kv.key == "gen_ai.evaluation.name")
        assert names == sorted(rubric.item_ids)

    # Exemplars: served as OpenMetrics on negotiation, stored and queryable in a real Prometheus.
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    # Issue #32: an opaque reference (a keyed hash), never the conversation id.
    assert '# {conversation_ref="ref-' in openmetrics.text and "otlp-" not in openmetrics.text
    stored = [e for series in exemplars for e in series["exemplars"]]
    assert stored and all(is_reference(e["labels"]["conversation_ref"]) for e in stored)
    assert {e["labels"]["trace_id"] for e in stored} <= {span[:32] for span in judged.values()}
