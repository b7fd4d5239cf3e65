"""Abuse at the hot path, bounded: open conversations capped per partition, truncation counted per
conversation and reason (turn events, whole conversations, metadata bombs)."""

from __future__ import annotations

import orjson
from prometheus_client import CollectorRegistry

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.stages.bounds import Limits, bound_conversation
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.hotpath import HotPath, Input
from monitor.stages.sessionize import Sessionizer
from monitor.stages.totals import PartitionTotals
from tests.support.memstore import MemStore

RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)
EVENT_BYTES = 1_000_000


def hot_path(limits: Limits, store: MemStore | None = None) -> tuple[HotPath, Metrics]:
    metrics = Metrics(CollectorRegistry())
    sessions = Sessionizer(store or MemStore(), limits, idle_timeout_s=1e6, closed_retention_s=1e6,
                           allowed_lateness_s=2.0)
    counts = MemStore()
    totals = PartitionTotals(counts, metrics.partition_families)
    hot = HotPath(sessions, DedupWindow(counts, window_s=100.0, max_keys=1000), totals,
                  Exporter(metrics, dimensions=[], cap=5, rubric=RUBRIC), metrics, RUBRIC,
                  max_event_bytes=EVENT_BYTES, max_request_bytes=1 << 20, sample_rate=0.0)
    hot.assign({0, 1}, now=0.0)
    return hot, metrics


def turn(cid: str, i: int, text: str = "hi", **kw: object) -> Input:
    raw = orjson.dumps({"conversation_id": cid, "turn_index": i, "role": "user", "text": text, "timestamp": 1.0,
                        **kw})
    return Input(cid.encode(), raw, 0)


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_open_conversations_are_capped_per_partition_oldest_finished_first() -> None:
    """100,000 one-turn conversations grew a worker without bound; here 5,000 against a cap of 1,000."""
    hot, metrics = hot_path(Limits(max_open=1000))
    closed: list[str] = []
    for start in range(0, 5000, 500):
        batch = [turn(f"c{i}", 0) for i in range(start, start + 500)]
        if start == 1000:
            batch.insert(0, turn("c0", 1))  # c0 is active again: the least recently active go first, not c0
        closed += [c.conversation_id for c, _ in hot.ingest(batch, now=float(start)).closed]
    assert value(metrics, "convmon_open_conversations") == len(hot.sessions.open) == 1000
    assert value(metrics, "convmon_conversations_evicted_total", reason="max_open_conversations") == 4000
    assert value(metrics, "convmon_conversations_finished_total", end_reason="idle") == 4000
    assert len(closed) == len(set(closed)) == 4000
    assert closed[:999] == [f"c{i}" for i in range(1, 1000)] and closed[999] == "c0"  # c0 went after c999
    assert set(hot.sessions.open) == {f"c{i}" for i in range(4000, 5000)}
    assert value(metrics, "convmon_late_events_total", kind="turn") == 0
    other = hot.ingest([Input(b"p1", turn("p1", 0).value, 1)], now=9e3)  # another partition: its own cap
    assert other.closed == [] and len(hot.sessions.open) == 1001


def test_the_cap_holds_after_a_restart() -> None:
    store = MemStore()
    hot, _ = hot_path(Limits(max_open=100), store)
    hot.ingest([turn(f"c{i}", 0) for i in range(100)], now=1.0)
    restarted, metrics = hot_path(Limits(max_open=50), store.restarted())
    out = restarted.ingest([turn("new", 0)], now=2.0)
    assert len(out.closed) == 51 and len(restarted.sessions.open) == 50  # a lowered cap applies at once
    assert value(metrics, "convmon_conversations_evicted_total", reason="max_open_conversations") == 51


def test_a_long_conversation_is_one_truncated_conversation() -> None:
    """A 10,000-turn conversation read 9,800 on the conversations counter: it counted dropped turns."""
    hot, metrics = hot_path(Limits())
    for start in range(0, 10_000, 1000):
        hot.ingest([turn("long", i) for i in range(start, start + 1000)], now=1.0)
    assert value(metrics, "convmon_conversations_truncated_total", reason="max_turns") == 1
    assert value(metrics, "convmon_turns_truncated_total", reason="max_turns") == 9800


def test_a_whole_conversation_of_20000_turns_is_capped_and_counted() -> None:
    """Whole conversations skipped every cap and the counter."""
    hot, metrics = hot_path(Limits())
    turns = [{"index": i, "role": "user", "text": "ok"} for i in range(20_000)]
    raw = orjson.dumps({"type": "conversation", "conversation_id": "whole", "turns": turns})
    assert len(raw) < EVENT_BYTES
    [(conversation, _)] = hot.ingest([Input(b"whole", raw, 0)], now=1.0).closed
    assert conversation.truncated and len(conversation.turns) == 200
    assert value(metrics, "convmon_conversations_truncated_total", reason="max_turns") == 1
    assert value(metrics, "convmon_turns_truncated_total", reason="max_turns") == 19_800


def test_a_metadata_bomb_is_one_truncated_conversation() -> None:
    """Three turns of 600 KB metadata each: keys dropped, but nothing was counted."""
    hot, metrics = hot_path(Limits())
    bomb = [turn("bomb", i, metadata={f"k{i}": "m" * 600_000}) for i in range(3)]
    hot.ingest(bomb, now=1.0)
    assert hot.sessions.open["bomb"].truncated and not hot.sessions.open["bomb"].meta
    assert value(metrics, "convmon_conversations_truncated_total", reason="max_metadata_bytes") == 1
    assert value(metrics, "convmon_turns_truncated_total", reason="max_turns") == 0
    whole = orjson.dumps({"type": "conversation", "conversation_id": "w", "metadata": {"k": "m" * 600_000},
                          "turns": [{"index": 0, "role": "user", "text": "x" * 40_000}]})
    [(conversation, _)] = hot.ingest([Input(b"w", whole, 0)], now=1.0).closed
    assert conversation.metadata == {} and conversation.turns[0].text.endswith("[...truncated]")
    assert value(metrics, "convmon_conversations_truncated_total", reason="max_metadata_bytes") == 2
    assert value(metrics, "convmon_conversations_truncated_total", reason="max_turn_chars") == 1


def test_a_conversation_within_the_caps_is_unchanged() -> None:
    conversation = Conversation(conversation_id="c", turns=[{"index": 0, "role": "user", "text": "hi"}],
                                metadata={"app": "web"})
    bounded, cut = bound_conversation(conversation, Limits())
    assert bounded is conversation and not cut
    tight = Limits(max_turns=2, max_chars=100, max_bytes=4096, max_metadata_bytes=256)
    three = conversation.model_copy(update={"turns": [*conversation.turns] * 3})
    bounded, cut = bound_conversation(three, tight)
    assert len(bounded.turns) == 2 and bounded.truncated and cut == {"max_turns": 1}


def test_an_evicted_end_without_turns_is_dead_lettered_not_lost() -> None:
    hot, metrics = hot_path(Limits(max_open=2))
    end = orjson.dumps({"type": "end", "conversation_id": "e", "timestamp": 2.0, "turn_count": 3})
    assert hot.ingest([Input(b"e", end, 0, rekeyed=True)], now=1.0).dead == []  # waits for its turns
    out = hot.ingest([turn("a", 0), turn("b", 0)], now=2.0)
    [letter] = out.dead
    assert letter.reason == "unknown_conversation" and out.closed == []
    assert value(metrics, "convmon_conversations_evicted_total", reason="max_open_conversations") == 1
