"""``bench throughput``'s turn-event input (the real input: ~25 messages a conversation) and its sizes.

Turn events are built from the same USS dialogues as the whole-conversation input, each conversation
under a fresh id (dialogues are reused when more conversations are asked for than the files hold),
and interleaved: round ``r`` carries turn ``r`` of every conversation that has one, so with 10,000
conversations a hot-path batch holds one turn each of a thousand conversations, all of them open at
once. Each conversation ends with an ``end`` event carrying ``turn_count``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from distill.datasets import UssDialogue
from monitor.contracts.events import Conversation, Turn, encode

# The earlier runtime (four agents and three topics per conversation), as docs/benchmarks.md recorded
# it for whole conversations (2,500 USS conversations, 4 partitions, one worker, same machine class).
# Rates from another run are not a same-run ratio: the JSON says so beside the comparison.
PRE18_HASHING_PER_S = 409.6  # conversations / s, distilled `hashing` (raw consume was 45638.4, floor 1094.3)


def turn_event_messages(dialogues: Sequence[UssDialogue], n: int, *, seed: int, prefix: str,
                        start: float = 1.7e9) -> list[tuple[bytes, bytes]]:
    """(key, value) turn and end events of ``n`` conversations, interleaved."""
    order = list(range(len(dialogues)))
    random.Random(seed).shuffle(order)
    picked = [dialogues[order[i % len(order)]] for i in range(n)]
    ids = [f"{prefix}-{i}" for i in range(n)]
    messages: list[tuple[bytes, bytes]] = []
    for r in range(max(len(d.turns) for d in picked)):
        for cid, dialogue in zip(ids, picked, strict=True):
            if r < len(dialogue.turns):
                turn = dialogue.turns[r]
                messages.append((cid.encode(), orjson.dumps({"conversation_id": cid, "turn_index": r,
                                                             "role": turn.role, "text": turn.text,
                                                             "timestamp": start + r})))
    for cid, dialogue in zip(ids, picked, strict=True):
        messages.append((cid.encode(), orjson.dumps({"type": "end", "conversation_id": cid,
                                                     "timestamp": start + len(dialogue.turns),
                                                     "turn_count": len(dialogue.turns)})))
    return messages


async def topic_bytes(bootstrap: str, topic: str, timeout_s: float = 120.0) -> tuple[int, int]:
    """(records, key + value bytes) of everything in ``topic`` now (0, 0 if it does not exist)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", max_partition_fetch_bytes=8 << 20)
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not tps:
            return 0, 0
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        records = size = 0
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            behind = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
            if not behind:
                break
            for batch in (await consumer.getmany(*behind, timeout_ms=500, max_records=10_000)).values():
                for record in batch:
                    records += 1
                    size += len(record.key or b"") + len(record.value or b"")
            # the fetched high watermark: Tansu's ListOffsets may end inside the last batch (runtime/log_ends.py)
            ends = {tp: max(end, consumer.highwater(tp) or 0) for tp, end in ends.items()}
        return records, size
    finally:
        await consumer.stop()


def changelog_bytes(bootstrap: str, app_id: str, table: str = "sessions") -> tuple[int, int]:
    return asyncio.run(topic_bytes(bootstrap, f"{app_id}-{table}-changelog"))


def whole_conversations(messages: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The finished-conversation records of turn-event messages (for the in-process rows)."""
    turns: dict[bytes, list[dict[str, object]]] = {}
    for key, value in messages:
        event = orjson.loads(value)
        if event.get("type", "turn") == "turn":
            turns.setdefault(key, []).append(event)
    out = []
    for key, events in turns.items():
        ordered = sorted(events, key=lambda e: int(str(e["turn_index"])))
        conversation = Conversation(conversation_id=key.decode(), turns=[
            Turn(index=int(str(e["turn_index"])), role=str(e["role"]), text=str(e["text"])) for e in ordered])
        out.append((key, encode(conversation)))
    return out
