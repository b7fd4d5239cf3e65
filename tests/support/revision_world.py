"""A hot path, judge stage and totals wired in memory, and the events of one conversation reopened: the world
the revision tests count in."""

from __future__ import annotations

import asyncio
from collections import Counter

import orjson
from prometheus_client import CollectorRegistry

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import RETRACTED, Metrics
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.judge.simulated import SimulatedJudge
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.hotpath import HotPath, Input
from monitor.stages.judging import JudgeStage
from monitor.stages.revisions import Revisions
from monitor.stages.scoring import Delivery, Scoring
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals, Series
from tests.support.hot_path import RUBRIC
from tests.support.memstore import MemStore

DSAT = "dsat.negative_feedback"


def classify(conversations: list[Conversation]) -> list[ScoreRecord]:
    """A distilled scorer whose probabilities follow the conversation's length (so a revision scores otherwise)."""
    out = []
    for c in conversations:
        p = min(1.0, 0.2 * len(c.turns))
        out.append(ScoreRecord(conversation_id=c.conversation_id, scorer="distilled", judge="hashing",
                               rubric_set=RUBRIC.id, rubric_version=RUBRIC.version, model_version="v1", R=0.0,
                               items=[ItemResult(item_id=i.id, polarity=i.polarity, probability=p, verdict=p >= 0.5)
                                      for i in RUBRIC.items]))
    return out


class World:
    def __init__(self, counts: MemStore | None = None, sessions: MemStore | None = None) -> None:
        self.metrics = metrics = Metrics(CollectorRegistry())
        self.counts, self.sessions = counts or MemStore(), sessions or MemStore()
        exporter = Exporter(metrics, dimensions=[], cap=5, rubric=RUBRIC)
        self.totals = totals = PartitionTotals(self.counts, metrics.partition_families)
        dedup = DedupWindow(self.counts, window_s=1e6, max_keys=10_000)
        revisions = Revisions(self.counts, totals.families, retention_s=1e6, max_keys=10_000,
                              enabled=True)
        sessionizer = Sessionizer(self.sessions, Limits(), idle_timeout_s=10.0, closed_retention_s=60.0,
                                  allowed_lateness_s=2.0, reopen_window_s=3600.0, reopen_max=1000)
        self.hot = HotPath(sessionizer, dedup, totals, exporter, metrics, RUBRIC, max_event_bytes=10_000,
                           max_request_bytes=1 << 20, sample_rate=1.0, revisions=revisions)
        self.judge = JudgeStage(SimulatedJudge(RUBRIC), lambda s: s, dedup, totals, exporter, metrics, RUBRIC,
                                sample_rate=1.0, max_request_bytes=1 << 20, clock=lambda: 5.0, revisions=revisions)
        self.scoring = Scoring(self.hot, classify, SimulatedJudge(RUBRIC), chunk=16, budget_pacing=False)
        self.hot.assign({0}, now=0.0)

    def feed(self, *events: dict[str, object], now: float = 1.0) -> Delivery:
        batch = [Input(str(e["conversation_id"]).encode(), orjson.dumps(e), 0, True, now) for e in events]
        return asyncio.run(self.scoring(self.hot.ingest(batch, now)))

    def judged(self, delivery: Delivery) -> list[tuple[ScoreRecord, bool]]:
        """Each judge-topic record's verdict, and whether it went on the scores topic (counted or superseded)."""
        out = []
        for send in delivery.judge:
            verdict, _ = asyncio.run(self.judge.verdict(send.value, send.key, 0, send.headers))
            assert verdict is not None
            out.append((verdict.score, self.judge.count(verdict.score, verdict.partition, verdict.shadow)))
        return out

    def net(self) -> Counter[Series]:
        """The exported totals, each series less its retraction twin: what the recording rules compute."""
        self.totals.written()()
        values = self.totals.exported()[0]
        net: Counter[Series] = Counter()
        for (name, labels), value in values.items():
            if name.endswith(RETRACTED):
                net[(name.removesuffix(RETRACTED), labels)] -= value
            else:
                net[(name, labels)] += value
        return +net if all(v >= -1e-9 for v in net.values()) else net


def turn(i: int, cid: str = "c") -> dict[str, object]:
    return {"conversation_id": cid, "turn_index": i, "role": "user" if i % 2 == 0 else "assistant",
            "text": f"t{i}", "timestamp": 1.0 + i}


def end(n: int, truth: list[str], cid: str = "c") -> dict[str, object]:
    return {"type": "end", "conversation_id": cid, "timestamp": 50.0, "turn_count": n, "simulated_truth": truth}


def first_and_reopened(w: World) -> tuple[Delivery, Delivery]:
    first = w.feed(turn(0), turn(1), end(2, []))
    second = w.feed(turn(2), turn(3), end(4, [DSAT]), now=2.0)
    return first, second
