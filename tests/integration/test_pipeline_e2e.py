"""End to end through a real broker and a real worker process: turn events in, scores out.

Valid conversations must be scored exactly once per scorer; every malformed event must land on the
dead-letter topic with its original bytes and a reason; the worker must stay up; /metrics must
show the expected counts, including the calibrated P(satisfied) of every judge score (a live
calibration model is published before the worker starts).
"""

from __future__ import annotations

import asyncio
from collections import Counter

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from monitor.contracts.rubric_set import load_rubric_set
from monitor.judge.simulated import SimulatedJudge
from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import by_label, total
from monitor.stages.route import in_sample
from monitor.tools.simulator.generate import ConversationGenerator
from tests.support.model_fixtures import publish_calibration_model, publish_distilled_model
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration

N_CONVERSATIONS = 40

MALFORMED: list[tuple[bytes, str]] = [
    (b"{this is not json", "malformed_json"),
    (b'{"conversation_id": "m1", "turn_index": 0, "role": "user", "timestamp": 1}', "invalid_schema"),  # no text
    (b'{"conversation_id": "m2", "turn_index": 0, "role": "robot", "text": "hi", "timestamp": 1}', "invalid_schema"),
    (b'{"conversation_id": "m3", "turn_index": 0, "role": "user", "text": "", "timestamp": 1}', "invalid_schema"),
    (b'{"conversation_id": "m4", "turn_index": "zero", "role": "user", "text": "x", "timestamp": 1}',
     "invalid_schema"),
    (b'["a", "list"]', "invalid_schema"),
    (b'{"type": "end", "conversation_id": "never-seen", "timestamp": 1}', "unknown_conversation"),
    (orjson.dumps({"conversation_id": "m5", "turn_index": 0, "role": "user", "text": "x" * 300_000,
                   "timestamp": 1}), "too_large"),
    (PII_EVENT := b'{"conversation_id": "m6", "turn_index": 0, "role": "robot", "text": "card 4111.1111.1111.1111, '
                  b'mail bob@example.com", "timestamp": 1}', "invalid_schema"),
]
# a JSON record is redacted field by field (ids kept) and re-encoded compactly
PII_REDACTED = (b'{"conversation_id":"m6","turn_index":0,"role":"robot","text":"card [CARD], mail [EMAIL]",'
                b'"timestamp":1}')


def collect_dead_letters(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list:
    async def run() -> list:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False, group_id=None)
        await consumer.start()
        out = []
        try:
            end = asyncio.get_running_loop().time() + timeout
            while len(out) < expected and asyncio.get_running_loop().time() < end:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    out.extend(records)
        finally:
            await consumer.stop()
        return out

    return asyncio.run(run())


def test_events_to_scores_exactly_once_with_dead_letters(broker: str, make_settings, tmp_path) -> None:
    # reopening off: the late turn is dead-lettered (tests/integration/test_reopen_e2e.py: reopening on)
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=0.5, idle_timeout_s=3.0,
                             max_event_bytes=200_000, registry_poll_s=1.0, reopen_window_s=0)
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    version = publish_distilled_model(settings, rubric)
    calibration_version = publish_calibration_model(settings, rubric)
    generator = ConversationGenerator(rubric, seed=7)
    conversations = [generator.generate(f"e2e-{i}", 1.7e9 + i, end_event=i % 5 != 0) for i in range(N_CONVERSATIONS)]
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker, acks="all")
        await producer.start()
        try:
            for conv in conversations:  # interleave: turns of different conversations alternate
                for event in conv.events:
                    await producer.send(settings.topic("events"), key=conv.conversation_id.encode(),
                                        value=orjson.dumps(event))
            for raw, _ in MALFORMED:
                await producer.send(settings.topic("events"), key=b"bad", value=raw)
            # A duplicate end event and a late turn for a conversation that already ended.
            done = conversations[1]
            await producer.send(settings.topic("events"), key=done.conversation_id.encode(),
                                value=orjson.dumps(done.events[-1]))
            late = {**done.events[0], "turn_index": 99}
            await producer.send(settings.topic("events"), key=done.conversation_id.encode(), value=orjson.dumps(late))
            await producer.flush()
        finally:
            await producer.stop()

    expected_llm = sum(in_sample(c.conversation_id, 0.5) for c in conversations)
    # Every 5th conversation has no end event, so no simulated truth: with no judge endpoint configured the router
    # counts it as unjudged instead of sending it to a judge that cannot score it.
    judged_ok = sum(in_sample(c.conversation_id, 0.5) and i % 5 != 0 for i, c in enumerate(conversations))

    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        asyncio.run(produce())

        # The end event for a conversation never seen waits allowed_lateness_s (5 s) for its turns, longer than
        # the idle close (3 s): wait for its dead letter too, not only for the scores.
        n_dead = len(MALFORMED) + 1  # the late turn

        def all_scored() -> bool:
            s = worker.samples()
            scored = by_label(s, "convmon_conversations_scored_total", "scorer")
            return (scored.get("distilled", 0) >= N_CONVERSATIONS and scored.get("llm", 0) >= judged_ok
                    and total(s, "convmon_dead_letters_total") >= n_dead)

        wait_until(all_scored, timeout=120, message="every conversation scored and every bad event dead-lettered")
        asyncio.run(asyncio.sleep(2))  # let anything extra (a double count) arrive before asserting
        samples = worker.samples()
        assert worker.alive(), worker.log()

    scored = by_label(samples, "convmon_conversations_scored_total", "scorer")
    assert scored == {"distilled": N_CONVERSATIONS, "llm": judged_ok}
    assert total(samples, "convmon_duplicate_scores_total") == 0
    finished = by_label(samples, "convmon_conversations_finished_total", "end_reason")
    assert finished.get("end", 0) == N_CONVERSATIONS - N_CONVERSATIONS // 5
    assert finished.get("idle", 0) == N_CONVERSATIONS // 5
    assert total(samples, "convmon_conversations_routed_total", route="sample") == judged_ok
    assert total(samples, "convmon_conversations_routed_total", route="unjudged") == expected_llm - judged_ok
    info = [labels for name, labels, _ in samples if name == "convmon_model_info"]
    assert info and info[0]["version"] == version
    restore = total(samples, "convmon_state_restore_seconds")  # the restore at start: tables, then the rebuild
    assert 0 < restore < 120, restore

    # Every judge score carried a calibrated P(satisfied): an expected count, not an argmax count.
    calibration = [labels for name, labels, _ in samples if name == "convmon_calibration_info"]
    assert calibration and calibration[0]["version"] == calibration_version
    assert by_label(samples, "convmon_satisfaction_calibrated_total", "scorer") == {"llm": judged_ok}
    expected_satisfied = total(samples, "convmon_satisfaction_probability_sum_total", scorer="llm")
    assert 0 < expected_satisfied < judged_ok
    assert expected_satisfied != round(expected_satisfied)  # a sum of probabilities, not of 0/1 verdicts
    assert total(samples, "convmon_satisfaction_uncalibrated_total") == 0

    dead = by_label(samples, "convmon_dead_letters_total", "reason")
    expected_reasons = Counter(reason for _, reason in MALFORMED)
    expected_reasons["late_event"] += 1  # the late turn; the duplicate end is a redelivery, counted apart
    assert total(samples, "convmon_redelivered_events_total", kind="end") == 1
    assert dead == dict(expected_reasons)

    letters = collect_dead_letters(broker, settings.topic("dead-letters"), sum(expected_reasons.values()))
    got = Counter()
    for record in letters:
        headers = dict(record.headers)
        got[headers["convmon-reason"].decode()] += 1
        assert headers["convmon-stage"] in (b"sessionize", b"judge")
        assert headers["convmon-detail"]
    assert got == expected_reasons
    originals = {record.value for record in letters}
    for raw, _ in MALFORMED:
        if raw is not PII_EVENT:
            assert raw in originals  # nothing to redact: the original bytes, untouched
    # dead_letter_raw is off by default: PII is redacted, the original size is a header
    assert PII_EVENT not in originals and PII_REDACTED in originals
    [pii] = [dict(r.headers) for r in letters if r.value == PII_REDACTED]
    assert pii["convmon-original-bytes"] == str(len(PII_EVENT)).encode() and pii["convmon-redacted"] == b"true"
    assert b"4111" not in pii["convmon-detail"]

    # The simulated judge labels itself as such: never a silent fake.
    assert SimulatedJudge.name == "simulated"
