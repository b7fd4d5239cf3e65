"""The hot path and the judge stage built from in-memory stores, with the events and records their tests feed."""

from __future__ import annotations

import orjson
from prometheus_client import CollectorRegistry

from monitor.contracts.errors import JudgeError
from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.hotpath import HotPath
from monitor.stages.judging import JudgeStage
from monitor.stages.sampler import InclusionPolicy
from monitor.stages.scoring import Delivery
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals, TotalsCollector
from monitor.stages.verdicts import BadVerdict, read_verdict, verdict_record
from tests.support.memstore import MemStore

RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)


def hot_path(sample_rate: float = 0.5, *, forward_input: bool = False,
             judge_configured: bool = True) -> tuple[HotPath, Metrics]:
    metrics = Metrics(CollectorRegistry())
    sessions = Sessionizer(MemStore(), Limits(), idle_timeout_s=10.0, closed_retention_s=60.0, allowed_lateness_s=2.0)
    exporter = Exporter(metrics, dimensions=[], cap=5, rubric=RUBRIC)
    counts = MemStore()
    totals = PartitionTotals(counts, metrics.partition_families)
    dedup = DedupWindow(counts, window_s=100.0, max_keys=1000)
    hot = HotPath(sessions, dedup, totals, exporter, metrics, RUBRIC,
                  max_event_bytes=10_000, max_request_bytes=1 << 20, sample_rate=sample_rate,
                  forward_input=forward_input, judge_configured=judge_configured)
    hot.assign({0, 1, 2, 3}, now=0.0)
    return hot, metrics


def turn(cid: str, i: int) -> bytes:
    return orjson.dumps({"conversation_id": cid, "turn_index": i, "role": "user", "text": f"t{i}", "timestamp": 1.0})


def end(cid: str, **kw: object) -> bytes:
    return orjson.dumps({"type": "end", "conversation_id": cid, "timestamp": 2.0, **kw})


def routed_hot_path(policy: InclusionPolicy) -> tuple[HotPath, Metrics]:
    metrics = Metrics(CollectorRegistry())
    exporter = Exporter(metrics, dimensions=[], cap=5, rubric=RUBRIC)
    sessions = Sessionizer(MemStore(), Limits(), idle_timeout_s=10.0, closed_retention_s=60.0, allowed_lateness_s=2.0)
    counts = MemStore()
    totals = PartitionTotals(counts, metrics.partition_families)
    dedup = DedupWindow(counts, window_s=100.0, max_keys=1000)
    return HotPath(sessions, dedup, totals, exporter, metrics, RUBRIC,
                   max_event_bytes=10_000, max_request_bytes=1 << 20, sample_rate=policy.base_rate,
                   policy=policy), metrics


def scored_record(cid: str, p: float) -> ScoreRecord:
    items = [ItemResult(item_id=i.id, polarity=i.polarity, probability=p, verdict=p >= 0.5) for i in RUBRIC.items]
    return ScoreRecord(conversation_id=cid, scorer="distilled", judge="hashing", rubric_set=RUBRIC.id,
                       rubric_version=RUBRIC.version, model_version="v1", items=items, R=0.0)


def complaint_conversation(cid: str, **kw: object) -> Conversation:
    return Conversation.model_validate({"conversation_id": cid, "turns": [{"index": 0, "role": "user", "text": "hi"}],
                                        "simulated_truth": ["dsat.negative_feedback"], **kw})


class FailingJudge:
    name = "failing"

    async def score(self, conversation: Conversation) -> ScoreRecord:
        raise JudgeError("server said no", reason="judge_http_error")

    def accepting(self) -> bool:
        return True

    def on_pace(self) -> bool:
        return True

    async def aclose(self) -> None:
        return None


def judge_stage(judge: object, owned: frozenset[int] = frozenset({0, 1, 2, 3})) -> tuple[JudgeStage, Metrics]:
    metrics = Metrics(CollectorRegistry())
    exporter = Exporter(metrics, dimensions=[], cap=5, rubric=RUBRIC)
    counts = MemStore()
    totals = PartitionTotals(counts, metrics.partition_families)
    metrics.registry.register(TotalsCollector(totals, metrics))
    totals.rebuild(set(owned))
    dedup = DedupWindow(counts, window_s=100.0, max_keys=1000)
    dedup.rebuild(set(owned))
    return JudgeStage(judge, lambda s: s, dedup, totals,  # type: ignore[arg-type]
                      exporter, metrics, RUBRIC, sample_rate=0.05, max_request_bytes=1 << 20,
                      clock=lambda: 1.0), metrics


async def judged(stage: JudgeStage, raw: bytes | None, key: bytes | None, partition: int,
                 headers: list[tuple[str, bytes]]) -> Delivery:
    """One judge-topic record as the engine handles it: the judge loop's verdict through the verdicts topic's
    encoding, counted by its partition's writer, which produces the score record only when it counted it."""
    verdict, out = await stage.verdict(raw, key, partition, headers)
    if verdict is None:
        return out
    sent = verdict_record(verdict)
    read = read_verdict(sent.value, sent.headers, verdict.partition)
    assert not isinstance(read, BadVerdict), read
    if stage.count(read.score, read.partition, read.shadow):
        out.scores.append(stage.score_record(read.score))
    return out
