"""What keeping scored conversations reopenable costs, per conversation: measured in process on the real stages.

For N conversations of ``turns`` turns, sessionized to their end: the bytes their state holds in the sessions
changelog (keys and JSON values, as logged) and the Python heap it takes (tracemalloc), with reopening on (the
turns kept after the close for ``CONVMON_REOPEN_WINDOW_S``) and off, beside the same conversations left open;
and the revision ledger's entry per scored conversation and scorer (stages/revisions.py: what a later revision
retracts). CPU per conversation is beside each. ``bench open-conversations`` reports it with its worker run.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterable
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from monitor.contracts.events import EndEvent, TurnEvent
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings
from monitor.stages.export import Exporter
from monitor.stages.revisions import Revisions
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals


class _Store:
    """The store as the changelog sees it: values through JSON."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        self.data[key] = orjson.loads(orjson.dumps(value))

    def delete(self, key: str, partition: int) -> None:
        self.data.pop(key, None)

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.data.items())

    def bytes(self, prefix: str = "") -> int:
        return sum(len(k) + len(orjson.dumps(v)) for k, v in self.data.items() if k.startswith(prefix))


def _sessions(n: int, turns: int, chars: int, *, window_s: float, end: bool, trace: bool) -> dict[str, float]:
    store = _Store()
    s = Sessionizer(store, Limits(), idle_timeout_s=1e9, closed_retention_s=3600.0, allowed_lateness_s=5.0,
                    reopen_window_s=window_s, reopen_max=n)
    text = ("I need help with my order, it has not arrived yet. " * (chars // 50 + 1))[:chars]
    if trace:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if trace else 0
    cpu = time.process_time()
    for i in range(n):
        cid = f"conversation-{i:07d}"
        for t in range(turns):
            s.turn(TurnEvent(conversation_id=cid, turn_index=t, role="user" if t % 2 == 0 else "assistant",
                             text=text, timestamp=1.0 + t, metadata={"app": "web"} if t == 0 else {}), 0, 1.0)
        if end:
            s.end(EndEvent(type="end", conversation_id=cid, timestamp=9.0, turn_count=turns), 0, 1.0, rekeyed=False)
    cpu = time.process_time() - cpu
    if not trace:
        return {"cpu_us_per_conversation": round(cpu / n * 1e6, 1)}
    heap = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return {"state_bytes": round(store.bytes() / n, 1), "heap_bytes": round(heap / n, 1),
            "open": len(s.open), "closed": len(s.closed), "reopenable": sum(map(len, s.reopenable.values()))}


def _ledger(n: int, *, trace: bool) -> dict[str, float]:
    settings = Settings()
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    metrics = Metrics(CollectorRegistry())
    exporter = Exporter(metrics, dimensions=[], cap=5, rubric=rubric)
    store = _Store()
    totals = PartitionTotals(store, metrics.partition_families)
    ledger = Revisions(store, totals.families, retention_s=1e9, max_keys=n, enabled=True)
    records = [ScoreRecord(conversation_id=f"conversation-{i:07d}", scorer="distilled", judge="hashing",
                           rubric_set=rubric.id, rubric_version=rubric.version, model_version="v1", R=0.0,
                           items=[ItemResult(item_id=item.id, polarity=item.polarity, probability=(i % 97) / 97,
                                             verdict=i % 97 >= 48) for item in rubric.items]) for i in range(n)]
    if trace:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if trace else 0
    cpu = time.process_time()
    for record in records:
        each: list[dict[tuple[str, tuple[str, ...]], float]] = []
        exporter.observe_batch([record], each=each)
        ledger.supersede(record, 0, each[0], 1.0)
    cpu = time.process_time() - cpu
    if not trace:
        return {"cpu_us_per_record": round(cpu / n * 1e6, 1)}
    heap = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return {"state_bytes": round(store.bytes("#r|") / n, 1), "heap_bytes": round(heap / n, 1),
            "rubric_items": len(rubric.items)}


def measure_reopen_state(conversations: int = 5000, turns: int = 6, chars: int = 200) -> dict[str, Any]:
    """Per conversation of ``turns`` turns of ``chars`` characters: open, closed and kept reopenable, closed with
    reopening off; and the revision ledger's entry per scored conversation and scorer. Heap under tracemalloc,
    CPU in a second pass without it (tracing slows every allocation)."""
    def both(measure: Any) -> dict[str, float]:
        return {**measure(trace=True), **measure(trace=False)}

    n, t, c = conversations, turns, chars
    return {"conversations": n, "turns": t, "turn_chars": c,
            "open": both(lambda trace: _sessions(n, t, c, window_s=86_400.0, end=False, trace=trace)),
            "closed_reopenable": both(lambda trace: _sessions(n, t, c, window_s=86_400.0, end=True, trace=trace)),
            "closed_reopen_off": both(lambda trace: _sessions(n, t, c, window_s=0.0, end=True, trace=trace)),
            "revision_ledger_per_scorer": both(lambda trace: _ledger(n, trace=trace))}
