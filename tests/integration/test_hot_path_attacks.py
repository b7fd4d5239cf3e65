"""Inputs that used to stop or corrupt the monitor, through a real broker and a real worker process.

The metadata bomb (metadata growing across turns past the producer limit), a 5 MB event, events
produced without a key (the same conversations as keyed input), and garbage on internal topics:
the worker stays up, every conversation is scored once, every bad record is on the dead-letter
topic with a reason, a bounded prefix of its bytes and its original size.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import load_rubric_set
from monitor.judge.redact import Redactor
from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import by_label, total
from monitor.tools.simulator.generate import ConversationGenerator
from tests.support.model_fixtures import publish_distilled_model
from tests.support.traffic import no_crash, read_topic
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration
N_UNKEYED = 30


def test_bombs_big_events_unkeyed_input_and_internal_garbage(broker: str, make_settings, tmp_path) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=30.0,
                             allowed_lateness_s=2.0, registry_poll_s=1.0)
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    publish_distilled_model(settings, rubric)
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    generator = ConversationGenerator(rubric, seed=3)
    unkeyed = [generator.generate(f"unkeyed-{i}", 1.7e9 + i) for i in range(N_UNKEYED)]
    for conv in unkeyed[: N_UNKEYED // 3]:  # a third without turn_count: the grace period closes them
        conv.events[-1].pop("turn_count")
    bomb = [{"type": "turn", "conversation_id": "bomb", "turn_index": i, "role": "user", "text": f"turn {i}",
             "timestamp": 1.7e9 + i, "metadata": {f"blob{i}": "m" * 630_000}} for i in range(3)]
    bomb.append({"type": "end", "conversation_id": "bomb", "timestamp": 1.7e9 + 9, "turn_count": 3,
                 "simulated_truth": []})
    huge = orjson.dumps({"conversation_id": "huge", "turn_index": 0, "role": "user", "text": "x" * 5_000_000,
                         "timestamp": 1.7e9})

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker, acks="all", max_request_size=8_000_000)
        await producer.start()
        try:
            for event in bomb:
                await producer.send(settings.topic("events"), key=b"bomb", value=orjson.dumps(event))
            await producer.send(settings.topic("events"), key=b"huge", value=huge)
            rounds = max(len(c.events) for c in unkeyed)
            for i in range(rounds):  # interleaved, in reverse order within each conversation, no key
                for conv in unkeyed:
                    if i < len(conv.events):
                        await producer.send(settings.topic("events"), key=None, value=orjson.dumps(conv.events[-1 - i]))
            await producer.send(settings.topic("judge"), key=b"g1", value=b"\x00garbage")
            await producer.send(settings.topic("labels"), key=b"g2", value=b"{not json")
            await producer.send(settings.topic("labels"), key=b"g3", value=b"[1, 2]")
            await producer.flush()
        finally:
            await producer.stop()

    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        asyncio.run(produce())
        wait_until(lambda: by_label(worker.samples(), "convmon_conversations_scored_total", "scorer")
                   .get("distilled", 0) >= N_UNKEYED + 1, 120, message="every conversation scored")
        time.sleep(3)
        samples = worker.samples()
        assert worker.alive(), worker.log()
        no_crash(worker)

    assert by_label(samples, "convmon_conversations_scored_total", "scorer").get("distilled") == N_UNKEYED + 1
    assert total(samples, "convmon_late_events_total") == 0  # no turn lost to re-keying
    dead = by_label(samples, "convmon_dead_letters_total", "reason")
    assert dead == {"too_large": 1, "invalid_schema": 1, "label_invalid": 2}

    letters = read_topic(broker, settings.topic("dead-letters"))
    got = Counter((dict(r.headers)["convmon-reason"], dict(r.headers)["convmon-stage"]) for r in letters)
    assert got == {(b"too_large", b"sessionize"): 1, (b"invalid_schema", b"judge"): 1,
                   (b"label_invalid", b"labels"): 2}
    big = next(r for r in letters if dict(r.headers)["convmon-reason"] == b"too_large")
    assert dict(big.headers)["convmon-original-bytes"] == str(len(huge)).encode()
    assert dict(big.headers)["convmon-truncated"] == b"1"
    assert huge.startswith(big.value) and 0 < len(big.value) < settings.max_request_bytes

    # The judge topic holds every finished conversation (sample_rate=1): unkeyed ones whole and in order.
    redact = Redactor.from_settings(settings.judge).redact
    judged = {r.key.decode(): Conversation.model_validate_json(r.value)
              for r in read_topic(broker, settings.topic("judge")) if r.key != b"g1"}
    for conv in unkeyed:
        turns = [e for e in conv.events if e["type"] == "turn"]
        got_conv = judged[conv.conversation_id]
        # text is redacted where it enters: the judge topic holds the redacted turns
        assert [(t.index, t.text) for t in got_conv.turns] == [(e["turn_index"], redact(e["text"])) for e in turns]
        assert got_conv.end_reason == "end" and got_conv.simulated_truth == conv.truth
    bombed = judged["bomb"]
    assert bombed.truncated and len(bombed.turns) == 3
    assert len(orjson.dumps(bombed.metadata)) <= settings.max_metadata_bytes
    assert all(len(r.value) < settings.max_request_bytes for r in read_topic(broker, settings.topic("scores")))
