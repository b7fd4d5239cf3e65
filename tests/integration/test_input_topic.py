"""The input topic is the producer's: convmon only reads it, whatever its name and partition count.

A topic named by ``CONVMON_INPUT_TOPIC`` (as the OpenTelemetry Collector's ``otlp_spans``) is created by the
test with 1, 3 or 4 partitions against convmon's 4, and filled with unkeyed and keyed JSON turn events or
unkeyed OTLP trace messages. It must hold exactly what the producer wrote after the run (re-keyed events
go to convmon's own ``<prefix>rekeyed``), and every conversation must be scored once by the distilled path,
on the scores topic and in the exported counter. The judge side is covered by the fault suite.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import httpx
import orjson
import pytest
from aiokafka import ConsumerRecord

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.engine.writer import TICK
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import total
from monitor.tools.otel_traffic import Chat, GenAiApp, conversation_texts
from monitor.tools.simulator.generate import ConversationGenerator
from tests.support.input_topics import PARTITIONS, distilled_per_conversation, input_worker
from tests.support.readback import read_to_end
from tests.support.topic_io import Record, list_topics, produce
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration
N = 8  # conversations per run


def json_input(prefix: str) -> list[Record]:
    """N conversations with an end event each: half keyed by conversation id, half unkeyed, interleaved."""
    rubric = load_rubric_set("spur-copilot", Settings().prompts_dir)
    generator = ConversationGenerator(rubric, seed=31)
    conversations = [generator.generate(f"{prefix}-{i}", time.time()) for i in range(N)]
    records: list[Record] = []
    for step in range(max(len(c.events) for c in conversations)):
        for i, conversation in enumerate(conversations):
            if step < len(conversation.events):
                key = conversation.conversation_id.encode() if i % 2 == 0 else None
                records.append((key, orjson.dumps(conversation.events[step])))
    return records


def otlp_input(prefix: str) -> list[Record]:
    """Two unkeyed OTLP messages, as the Collector's kafka exporter writes them: every conversation's first
    call, then its second call repeating the history."""
    app = GenAiApp()
    chats = [Chat(f"{prefix}-{i}", conversation_texts(2, f"{prefix}{i}")) for i in range(N)]
    app.trace(chats, calls=[0])
    first = app.take_traces("otlp_proto")
    app.trace(chats, calls=[1])
    return [(None, first), (None, app.take_traces("otlp_proto"))]



def identities(records: list[ConsumerRecord]) -> list[tuple[int, int, bytes | None, bytes]]:
    return sorted((r.partition, r.offset, r.key, r.value) for r in records)



@pytest.mark.parametrize(("input_format", "partitions"), [  # ~35 s each: two in the default selection
    ("json", 4), ("otlp_traces", 1),
    pytest.param("json", 1, marks=pytest.mark.long), pytest.param("json", 3, marks=pytest.mark.long),
    pytest.param("otlp_traces", 3, marks=pytest.mark.long),
])
def test_the_input_topic_is_only_read_and_every_conversation_is_scored_once(
        broker: str, make_settings, tmp_path: Path, input_format: str, partitions: int) -> None:
    settings = input_worker(make_settings, broker, input_format, partitions)
    prefix = f"in-{input_format}-{partitions}"
    records = json_input(prefix) if input_format == "json" else otlp_input(prefix)
    produce(broker, settings.input_topic_name, records, max_request_size=4 << 20)
    before = read_to_end(broker, settings.input_topic_name)
    assert before.complete and len(before.records) == len(records)

    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        wait_until(lambda: total(worker.samples(), "convmon_conversations_scored_total", scorer="distilled") >= N,
                   timeout=120, message=f"every conversation scored ({worker.log()})")
        time.sleep(3)  # a double count would arrive now
        samples = worker.samples()
        assert worker.alive(), worker.log()

    assert total(samples, "convmon_conversations_scored_total", scorer="distilled") == N
    assert total(samples, "convmon_duplicate_scores_total") == 0
    assert total(samples, "convmon_input_partitions") == partitions
    assert total(samples, "convmon_internal_topic_partitions") == PARTITIONS
    forwarded = "every input event is forwarded through convmon's re-keyed topic" in worker.log()
    assert forwarded == (partitions != PARTITIONS), worker.log()
    assert distilled_per_conversation(broker, settings) == Counter({f"{prefix}-{i}": 1 for i in range(N)})

    after = read_to_end(broker, settings.input_topic_name)
    assert after.complete and len(after.records) == len(records)  # not one record from convmon
    assert identities(after.records) == identities(before.records)
    rekeyed = [r for r in read_to_end(broker, settings.topic("rekeyed")).records
               if TICK not in dict(r.headers)]  # the writers' clock ticks to their own partitions: not input
    assert rekeyed and all(r.key and dict(r.headers) == {} for r in rekeyed)  # convmon JSON, under its id
    # the input was neither created nor listed among convmon's topics; the default input name never appeared
    assert settings.input_topic_name not in topic_names(settings)
    assert settings.topic("events") not in list_topics(broker)


@pytest.mark.long
def test_two_workers_forwarding_an_input_of_another_partition_count_score_each_conversation_once(
        broker: str, make_settings, tmp_path: Path) -> None:
    """3 input partitions, convmon's 4, two workers: the one with fewer input partitions (or none) still gets
    re-keyed partitions; together they score every conversation once."""
    settings = input_worker(make_settings, broker, "json", 3)
    a, b = WorkerProcess(settings, tmp_path / "a.log"), WorkerProcess(settings, tmp_path / "b.log")
    try:
        a.start()
        b.start()
        wait_until(lambda: all(httpx.get(f"http://127.0.0.1:{w.port}/readyz", timeout=5).status_code == 200
                               for w in (a, b)), 90, message="both workers joined")
        records = json_input("two")
        produce(broker, settings.input_topic_name, records)

        def scored() -> float:
            return sum(total(w.samples(), "convmon_conversations_scored_total", scorer="distilled") for w in (a, b))

        wait_until(lambda: scored() >= N, timeout=120, message=f"every conversation scored ({a.log()}{b.log()})")
        time.sleep(3)
        assert scored() == N and a.alive() and b.alive()
    finally:
        a.stop()
        b.stop()
    assert distilled_per_conversation(broker, settings) == Counter({f"two-{i}": 1 for i in range(N)})
    assert len(read_to_end(broker, settings.input_topic_name).records) == len(records)
