"""OTLP GenAI log events in, scores and evaluation events out, through a real broker and worker.

The logs pipeline of the Collector's kafka exporter (``otlp_logs`` topics): a chat app instrumented
with the real OpenTelemetry SDK emits one ``gen_ai.client.inference.operation.details`` event per
call (history and answer as attributes, in the call's span context) through its own LoggerProvider;
the SDK's OTLP log encoder turns a batch into the unkeyed ``ExportLogsServiceRequest`` the exporter
would publish, several conversations per message, later calls repeating the history, with an
unrelated log record among them. Every conversation must be sessionized and scored exactly once,
and its verdicts must reach an OTLP/HTTP receiver parented to the span of its last call.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from monitor.runtime.scrape import by_label, total
from monitor.stages.otlp import any_value
from monitor.tools.otel_traffic import Chat, GenAiApp, conversation_texts
from tests.support.otlp import OtlpReceiver, otlp_worker, produce_unkeyed, unreferenced
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration
N = 5  # conversations, all in the same messages


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_otlp_log_events_to_scores_and_evaluation_events(broker: str, make_settings, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, encoding: str) -> None:
    settings, rubric = otlp_worker(make_settings, broker, "otlp_logs", encoding)
    app = GenAiApp()
    chats = [Chat(f"logs-{encoding}-{i}", conversation_texts(2, f"L{encoding}{i}")) for i in range(N)]
    app.trace(chats, logs=True, calls=[0])
    app.logger.emit(body="GET /healthz 200", attributes={"http.route": "/healthz"})  # not a GenAI event
    message_1 = app.take_logs(encoding)  # every conversation's first call, one message
    second = app.trace(chats, logs=True, calls=[1])
    message_2 = app.take_logs(encoding)  # the second calls, repeating the first ones' history
    app.shutdown()
    judged = {c.conversation_id: second[c.conversation_id][0] for c in chats}

    receiver = OtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_BLRP_SCHEDULE_DELAY", "200")
    try:
        with WorkerProcess(settings, tmp_path / "worker.log") as worker:
            produce_unkeyed(broker, settings.topic("events"), [message_1, message_2, b"\x0a\xff not otlp"])
            wait_until(lambda: total(worker.samples(), "convmon_conversations_scored_total", scorer="distilled") >= N,
                       timeout=120, message="every conversation scored")
            wait_until(lambda: len(receiver.records) >= N * len(rubric.items), timeout=30,
                       message="evaluation events at the OTLP receiver")
            time.sleep(2)  # anything extra (a double count) would arrive now
            samples = worker.samples()
            assert worker.alive(), worker.log()
    finally:
        receiver.stop()

    assert by_label(samples, "convmon_conversations_scored_total", "scorer") == {"distilled": N}
    assert by_label(samples, "convmon_conversations_finished_total", "end_reason") == {"idle": N}
    assert total(samples, "convmon_duplicate_scores_total") == 0
    assert total(samples, "convmon_otlp_records_total", signal="logs", outcome="turns") == 2 * N
    assert total(samples, "convmon_otlp_records_total", signal="logs", outcome="not_genai") == 1
    assert total(samples, "convmon_otlp_records_total", signal="traces") == 0
    assert by_label(samples, "convmon_dead_letters_total", "reason") == {"malformed_otlp": 1}
    repeated = total(samples, "convmon_repeated_turns_total")  # see the traces test: either order is fine
    assert N <= repeated <= 2 * N
    assert total(samples, "convmon_events_total", kind="turn") == 6 * N  # once, where decoded (not again re-keyed)

    seen: dict[str, list[str]] = {}
    for record in receiver.records:
        attrs = {kv.key: any_value(kv.value) for kv in record.attributes}
        cid = unreferenced(attrs["gen_ai.conversation.id"], judged)
        assert f"{record.trace_id.hex()}-{record.span_id.hex()}" == judged[cid]  # the last call's span
        assert attrs["gen_ai.response.id"] == f"chatcmpl-{cid}-1"
        seen.setdefault(cid, []).append(attrs["gen_ai.evaluation.name"])
    assert sorted(seen) == sorted(judged)
    assert all(sorted(names) == sorted(rubric.item_ids) for names in seen.values())  # each item once
