"""A deployment of the faust engine (the releases before this one) switched to this one, over a real broker: the
state the faust changelogs hold is taken over at each partition's first restore, and the input the faust group
committed is not read again.

The faust release's state is tests/data/upgrade-state-9858d22.json, written by such a worker
(tests/support/upgrade_state.py): two open conversations (one cut by max_turns), two finished and counted. Here its
records go to the faust changelog topics as faust wrote them (JSON keys and values, in the state's partitions),
its input to the input topic, and the faust group's offsets are committed past that input; then a worker of this
release starts and the rest of the open conversations arrives. The open ones are scored with their old turns, the
finished ones not again (a re-delivered end event is a duplicate), and the exported totals go on from the old ones.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import decode_score
from monitor.contracts.settings import Settings
from monitor.runtime.scrape import total
from monitor.runtime.topics import create_topics
from tests.support.model_fixtures import publish_distilled_model
from tests.support.readback import read_to_end
from tests.support.upgrade_state import RUBRIC, T0, end, turn
from tests.support.workers import WorkerProcess, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
OLD = Path(__file__).parents[1] / "data" / "upgrade-state-9858d22.json"
PARTITION = {"open-a": 0, "done-c": 0, "open-cut": 1, "done-b": 1}  # where the old worker kept each conversation
# what the old worker had read: as tests/support/upgrade_state.py's batch (the input its group committed)
OLD_INPUT = ([("open-a", turn("open-a", i), T0 + i) for i in range(2)]
             + [("open-cut", turn("open-cut", i), T0 + i) for i in range(5)]
             + [("done-b", turn("done-b", i), T0 + i) for i in range(2)] + [("done-b", end("done-b"), T0 + 30)]
             + [("done-c", turn("done-c", 0), T0), ("done-c", end("done-c"), T0 + 30)])
NEW_INPUT = [("open-a", turn("open-a", 2), T0 + 2), ("open-a", end("open-a"), T0 + 30),
             ("open-cut", end("open-cut"), T0 + 30), ("done-b", end("done-b"), T0 + 30)]  # done-b's: re-delivered


def state_partition(key: str, value: Any) -> int:
    """The partition a faust changelog record of this state was written to."""
    if key.startswith(("#g|", "#c|")):
        return int(orjson.loads(key[3:])[0]) if key.startswith("#g|") else int(key[3:])
    if ":" in key and not key.startswith(("s|", "t|", "e|")):  # a dedup mark: [time, partition, batch]
        return int(value[1])
    return PARTITION[key.split("|")[1]]


async def leave_faust_state(settings: Settings, bootstrap: str) -> None:
    old = orjson.loads(OLD.read_bytes())
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(f"{settings.app_id}-{table}-changelog", settings.topic_partitions, 1,
                                            topic_configs={"cleanup.policy": "compact"})
                                   for table in ("sessions", "scored")])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for table in ("sessions", "scored"):
            for key, value in old[table].items():
                await producer.send_and_wait(f"{settings.app_id}-{table}-changelog", orjson.dumps(value),
                                             key=orjson.dumps(key), partition=state_partition(key, value))
        ends: dict[int, int] = {}
        for cid, raw, ts in OLD_INPUT:
            sent = await producer.send_and_wait(settings.topic("events"), raw, key=cid.encode(),
                                                partition=PARTITION[cid], timestamp_ms=int(ts * 1000))
            ends[sent.partition] = sent.offset + 1
    finally:
        await producer.stop()
    faust = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=settings.app_id, enable_auto_commit=False)
    await faust.start()
    try:
        tps = {TopicPartition(settings.topic("events"), p): offset for p, offset in ends.items()}
        faust.assign(list(tps))
        await faust.commit(tps)  # where the faust engine's group left the input
    finally:
        await faust.stop()


async def send_new_input(settings: Settings, bootstrap: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for cid, raw, ts in NEW_INPUT:
            await producer.send_and_wait(settings.topic("events"), raw, key=cid.encode(), partition=PARTITION[cid],
                                         timestamp_ms=int(ts * 1000))
    finally:
        await producer.stop()


def partition_total(worker: WorkerProcess, partition: int, scorer: str) -> float:
    return total(worker.samples(), "convmon_partition_conversations_scored_total", partition=str(partition),
                 scorer=scorer)


def test_the_faust_engines_state_and_offsets_are_taken_over(broker: str, make_settings, tmp_path: Path) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=0.0, registry_poll_s=1.0, max_turns=3,
                             idle_timeout_s=1e6, allowed_lateness_s=2.0)
    publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
    asyncio.run(create_topics(settings))
    asyncio.run(leave_faust_state(settings, broker))
    old_exported = {(p, attr, tuple(labels)): v for p, attr, labels, v in orjson.loads(OLD.read_bytes())["exported"]}
    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        ready = f"http://127.0.0.1:{worker.port}/readyz"
        wait_until(lambda: httpx.get(ready, timeout=5).status_code == 200, 90, message="ready")
        # ready means restored: the old worker's open conversations and totals are there at once
        assert total(worker.samples(), "convmon_open_conversations") == 2, worker.log()
        assert partition_total(worker, 0, "distilled") == old_exported[(0, "scored", ("distilled",))] == 1
        assert partition_total(worker, 1, "distilled") == old_exported[(1, "scored", ("distilled",))] == 1
        assert partition_total(worker, 0, "llm") == old_exported[(0, "scored", ("llm",))] == 1
        asyncio.run(send_new_input(settings, broker))
        wait_until(lambda: partition_total(worker, 0, "distilled") == 2 and partition_total(worker, 1, "distilled")
                   == 2, 90, message="open-a and open-cut scored and exported")
        wait_until(lambda: total(worker.samples(), "convmon_redelivered_events_total", kind="end") == 1, 30,
                   message="done-b's end event taken for a re-delivery")
        assert partition_total(worker, 0, "llm") == 1
        assert total(worker.samples(), "convmon_open_conversations") == 0
    scores = [decode_score(r.value, RUBRIC) for r in read_to_end(broker, settings.topic("scores")).records]
    assert sorted(s.conversation_id for s in scores) == ["open-a", "open-cut"]  # nothing of the old input again
    assert "took" in worker.log() and "from the faust engine's changelogs" in worker.log()
