"""Counted once, by the latest revision: a re-scored conversation's new revision retracts what the previous one
counted, in the same batch; a verdict of a superseded revision goes on the scores topic but is not counted."""

from __future__ import annotations

import asyncio
from collections import Counter

import orjson
from prometheus_client import CollectorRegistry

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import RETRACTED, Metrics
from monitor.contracts.score_codec import decode_score
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.judge.simulated import SimulatedJudge
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.hotpath import HotPath, Input
from monitor.stages.judging import JudgeStage
from monitor.stages.revisions import Revisions
from monitor.stages.scoring import Delivery, Scoring
from monitor.stages.sends import REVISION
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals, Series, TotalsCollector
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
        self.offset = 0

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


def test_the_latest_revision_counts_once_and_retracts_the_previous_in_the_same_batch() -> None:
    w = World()
    first, second = first_and_reopened(w)
    assert [decode_score(s.value, RUBRIC).revision for s in first.scores + second.scores] == [1, 2]
    assert dict(second.judge[0].headers)[REVISION] == b"2" and REVISION not in dict(first.judge[0].headers)
    assert [ok for _, ok in w.judged(first) + w.judged(second)] == [True, True]
    net = w.net()
    assert net[("scored", ("distilled",))] == 1 and net[("scored", ("llm",))] == 1
    # the distilled counts are revision 2's (4 turns: p = 0.8, yes), not revision 1's (p = 0.4, no)
    item = RUBRIC.items[0]
    assert net[("verdicts", (item.id, item.polarity, "distilled", "yes"))] == 1
    assert net[("verdicts", (item.id, item.polarity, "distilled", "no"))] == 0
    assert abs(net[("probability_sum", (item.id, item.polarity, "distilled"))] - 0.8) < 1e-9
    dsat = next(i for i in RUBRIC.items if i.id == DSAT)
    assert net[("verdicts", (DSAT, dsat.polarity, "llm", "yes"))] == 1  # the judge's verdict on revision 2


def test_a_verdict_for_a_superseded_revision_is_stored_but_not_counted() -> None:
    w = World()
    first, second = first_and_reopened(w)
    [(late, stored)] = [*w.judged(second), *w.judged(first)][1:]  # revision 2's verdict came first
    assert late.revision == 1 and stored  # goes on the scores topic ...
    dsat = next(i for i in RUBRIC.items if i.id == DSAT)
    net = w.net()
    # ... but not counted
    assert net[("scored", ("llm",))] == 1 and net[("verdicts", (DSAT, dsat.polarity, "llm", "yes"))] == 1
    assert w.metrics.registry.get_sample_value("convmon_superseded_scores_total", {"scorer": "llm"}) == 1


def test_a_revision_delivered_again_is_a_duplicate_not_a_second_retraction() -> None:
    w = World()
    _, second = first_and_reopened(w)
    record = decode_score(second.scores[0].value, RUBRIC)
    w.hot.count([record], {"c": 0}, now=3.0)  # the same revision's record again (a batch re-processed)
    assert w.net()[("scored", ("distilled",))] == 1
    assert w.metrics.registry.get_sample_value("convmon_duplicate_scores_total", {"scorer": "distilled"}) == 1


def test_the_ledger_survives_a_restore_so_a_later_revision_still_retracts() -> None:
    w = World()
    w.feed(turn(0), turn(1), end(2, []))
    again = World(w.counts, w.sessions)  # a new owner restores both stores
    again.feed(turn(2), turn(3), end(4, [DSAT]), now=2.0)
    assert again.net()[("scored", ("distilled",))] == 1


def test_every_series_is_exported_with_its_retraction_twin_from_zero() -> None:
    w = World()
    w.feed(turn(0), turn(1), end(2, []))
    w.totals.written()()
    collected = {f.name: f for f in TotalsCollector(w.totals, w.metrics, retracting=True).collect()}
    twins = [(s.name, s.labels, s.value) for s in collected["convmon_partition_conversations_scored_retracted"].samples]
    assert twins == [("convmon_partition_conversations_scored_retracted_total",
                      {"partition": "0", "scorer": "distilled"}, 0.0)]
    item = RUBRIC.items[0]
    verdicts = {(s.labels["verdict"], s.value) for s in collected["convmon_partition_rubric_verdicts_retracted"].samples
                if s.labels["rubric"] == item.id and s.labels["scorer"] == "distilled"}
    assert verdicts == {("yes", 0.0), ("no", 0.0)}
    off = {f.name for f in TotalsCollector(w.totals, w.metrics).collect() if f.samples}
    assert not any(name.endswith(RETRACTED) for name in off)  # reopening off: no twins
