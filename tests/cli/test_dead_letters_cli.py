"""`convmon dead-letters tail | summary` against the real (embedded) broker: reason, field and detail from the
headers, one line each; counts by reason; the record's value is never printed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from monitor.contracts.settings import REPO_ROOT
from monitor.judge.reference import ConversationRef
from monitor.stages.deadletter import dead_letter

KEY = "k" * 32  # CONVMON_PII_REFERENCE_KEY: the same key the worker would log references with


async def _send(bootstrap: str, topic: str) -> None:
    """The letters in one record batch (as a worker's batch sends them): the development broker then lists the
    partition's end as 1."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=200)
    await producer.start()
    try:
        letters = [
            dead_letter(b'{"text": "private words", "turn_index": "0"}', b"conv-1", reason="invalid_schema",
                        detail="field 'turn_index': Input should be a valid integer", stage="sessionize",
                        max_bytes=1 << 20, field="turn_index"),
            dead_letter(b"{nope", None, reason="malformed_json", detail="unexpected character", stage="sessionize",
                        max_bytes=1 << 20),
            dead_letter(b'{"x": 1}', b"conv-2", reason="invalid_schema", detail="field 'role': Field required",
                        stage="sessionize", max_bytes=1 << 20, field="role"),
        ]
        sent = [await producer.send(topic, letter.value, key=letter.key, headers=letter.headers, partition=0)
                for letter in letters]
        await producer.flush()
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def _listed_end(bootstrap: str, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        return int((await consumer.end_offsets([tp]))[tp])
    finally:
        await consumer.stop()


def _cli(broker: str, prefix: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVMON_", "OPENAI_"))}
    env |= {"PYTHONPATH": str(REPO_ROOT), "CONVMON_BROKER_URL": f"kafka://{broker}", "CONVMON_TOPIC_PREFIX": prefix,
            "COLUMNS": "200", "CONVMON_PII_REFERENCE_KEY": KEY}
    return subprocess.run([sys.executable, "-m", "monitor.cli", "dead-letters", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_tail_and_summary_read_the_headers(broker: str) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}."
    empty = _cli(broker, prefix, "tail")
    assert empty.returncode == 0 and f"no dead letters on {prefix}dead-letters" in empty.stdout
    asyncio.run(_send(broker, f"{prefix}dead-letters"))
    # what this test is about: the broker lists an end inside the batch, and every letter is still read
    assert asyncio.run(_listed_end(broker, f"{prefix}dead-letters")) < 3, \
        "the broker lists the true end now: tests/cli/test_dead_letters_read.py still covers a wrong one"

    tail = _cli(broker, prefix, "tail", "--json")
    assert tail.returncode == 0, tail.stderr
    rows = [json.loads(line) for line in tail.stdout.splitlines()]
    assert [(r["reason"], r["field"]) for r in rows] == [
        ("invalid_schema", "turn_index"), ("malformed_json", "-"), ("invalid_schema", "role")]
    assert rows[0]["conversation"] == ConversationRef(KEY.encode())("conv-1") and rows[1]["conversation"] == "-"
    assert rows[0]["detail"] == "field 'turn_index': Input should be a valid integer"
    assert "private words" not in tail.stdout

    text = _cli(broker, prefix, "tail", "-n", "1")
    [line] = text.stdout.splitlines()  # the newest of the partition
    assert "invalid_schema field=role stage=sessionize conversation=ref-" in line
    assert line.endswith("p0@2: field 'role': Field required")

    summary = _cli(broker, prefix, "summary", "--json")
    counts = json.loads(summary.stdout)
    assert counts["letters"] == 3 and counts["by_reason"] == {"invalid_schema": 2, "malformed_json": 1}
    assert counts["by_reason_and_field"]["invalid_schema/turn_index"] == 1
    lines = _cli(broker, prefix, "summary").stdout.splitlines()
    assert lines[0] == f"3 dead letters on {prefix}dead-letters"
    assert lines[1].split() == ["2", "invalid_schema", "(field:", "turn_index", "1,", "role", "1)"]
