"""OTLP GenAI telemetry in, evaluation events and exemplars out, through a real broker, worker and Prometheus.

A chat app traced by the real OpenTelemetry SDK publishes its spans as the Collector's kafka exporter
does: unkeyed ``ExportTraceServiceRequest`` messages (OTLP encoders of the SDK), several conversations
per message, each later call repeating the history. Every conversation must be sessionized and scored
exactly once; its verdicts must reach an OTLP/HTTP receiver as ``gen_ai.evaluation.result`` log events
parented to the judged span; the verdict counters must carry exemplars a real Prometheus stores.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from monitor.judge.reference import is_reference
from monitor.runtime.broker import free_port
from monitor.runtime.scrape import by_label, total
from monitor.stages.otlp import any_value
from monitor.tools.otel_traffic import Chat, GenAiApp, conversation_texts
from tests.support.otlp import OtlpReceiver, otlp_worker, produce_unkeyed, unreferenced
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration
N = 6  # conversations, all in the same messages


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
    # An opaque reference (a keyed hash), never the conversation id.
    assert '# {conversation_ref="ref-' in openmetrics.text and "otlp-" not in openmetrics.text
    stored = [e for series in exemplars for e in series["exemplars"]]
    assert stored and all(is_reference(e["labels"]["conversation_ref"]) for e in stored)
    assert {e["labels"]["trace_id"] for e in stored} <= {span[:32] for span in judged.values()}
