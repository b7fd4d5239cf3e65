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
from aiokafka.admin import AIOKafkaAdminClient

from distill.datasets import UssDialogue
from monitor.contracts.events import Conversation, Turn, encode
from monitor.engine.changelog import STORES
from monitor.runtime.topics import STATE_CHANGELOG

SESSIONS = STORES[0]  # the key prefix of the sessions store's records in the engine's changelog

# The earlier runtime (four agents and three topics per conversation), as docs/benchmarks.md recorded
# it for whole conversations (2,500 USS conversations, 4 partitions, one worker, same machine class).
# Rates from another run are not a same-run ratio: the JSON says so beside the comparison.
PRE18_HASHING_PER_S = 409.6  # conversations / s, distilled `hashing` (raw consume was 45638.4 in that run)


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


async def partitions_of(bootstrap: str, topic: str) -> list[int]:
    """The partitions of ``topic`` (none if it does not exist: listed first, as a broker that auto-creates topics
    would create one a metadata request names)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            return []
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return sorted(p["partition"] for t in described if t.get("topic") == topic and not t.get("error_code")
                  for p in t.get("partitions", ()))


async def topic_bytes(bootstrap: str, topic: str, timeout_s: float = 120.0, key_prefix: bytes = b"") -> tuple[int, int]:
    """(records, key + value + header bytes) of the records in ``topic`` now whose key starts with ``key_prefix``
    (0, 0 if it does not exist)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", max_partition_fetch_bytes=8 << 20)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in await partitions_of(bootstrap, topic)]
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
                    if not (record.key or b"").startswith(key_prefix):
                        continue
                    records += 1
                    size += len(record.key or b"") + len(record.value or b"")
                    size += sum(len(name.encode()) + len(value or b"") for name, value in record.headers or ())
            # the fetched high watermark: Tansu's ListOffsets may end inside the last batch
            ends = {tp: max(end, consumer.highwater(tp) or 0) for tp, end in ends.items()}
        return records, size
    finally:
        await consumer.stop()


def changelog_bytes(bootstrap: str, app_id: str, store: bytes = SESSIONS) -> tuple[int, int]:
    """(records, bytes) one store of the engine's state changelog holds: by default the open sessions' turns,
    ends and headers (the counts store and the restore fences are the rest of that topic)."""
    return asyncio.run(topic_bytes(bootstrap, f"{app_id}-{STATE_CHANGELOG}-changelog", key_prefix=store))


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
