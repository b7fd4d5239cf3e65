"""The router in the hot path and the judge stage: pi from the batch's distilled scores, headers, non-response."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.contracts.score_codec import decode_score, encode_score
from monitor.judge.simulated import SimulatedJudge
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.hotpath import HotPath
from monitor.stages.judging import JudgeStage
from monitor.stages.route import in_sample
from monitor.stages.sampler import InclusionPolicy
from monitor.stages.sends import PI, SAMPLED_BY, SOURCE_PARTITION, WEIGHT
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals
from tests.support.hot_path import (
    RUBRIC,
    FailingJudge,
    complaint_conversation,
    judge_stage,
    judged,
    routed_hot_path,
    scored_record,
)
from tests.support.memstore import MemStore


def test_uncertain_and_complaining_conversations_are_boosted_with_pi_on_every_request() -> None:
    policy = InclusionPolicy(base_rate=0.05, active_rate=0.2, feedback_rate=1.0)
    policy.set_model("v1", 0.1)
    hot, metrics = routed_hot_path(policy)
    ids = [f"c{i}" for i in range(600)]
    closed = [(complaint_conversation(c, feedback={"thumbs": "down"} if i % 10 == 0 else None), 0)
              for i, c in enumerate(ids)]
    records = [scored_record(c, 0.5 if i % 2 else 0.99) for i, c in enumerate(ids)]  # odd: uncertain, even: sure
    sends = hot.judge_slice(closed, judge_accepting=True, records=records)
    headers = {s.key.decode(): dict(s.headers) for s in sends}
    picked = set(headers)
    assert {c for c in ids if in_sample(c, 0.05)} <= picked  # the hash slice, whatever the boost
    assert {c for i, c in enumerate(ids) if i % 10 == 0} <= picked  # feedback_rate 1
    odd = sum(1 for i, c in enumerate(ids) if i % 2 and c in picked)
    even = sum(1 for i, c in enumerate(ids) if not i % 2 and i % 10 and c in picked)
    assert odd > 3 * even  # uncertainty raised pi
    for cid, h in headers.items():
        pi = float(h[PI])
        assert float(h[WEIGHT]) == pytest.approx(1 / pi) and 0.05 <= pi <= 1.0
        assert h[SAMPLED_BY] == (b"hash" if in_sample(cid, 0.05) else b"feedback" if int(cid[1:]) % 10 == 0
                                 else b"uncertainty")
    shadows = hot.mark_shadows(records, sends)
    assert {r.conversation_id for r in shadows if r.shadow} == picked
    sampled = {by: metrics.registry.get_sample_value("convmon_judge_sampled_total", {"by": by})
               for by in ("hash", "uncertainty", "feedback")}
    assert sum(sampled.values()) == len(sends) and all(v for v in sampled.values())
    # budget pacing: boosts off, pi is the hash rate and so is what is recorded
    paced = hot.judge_slice(closed, judge_accepting=True, boost=False, records=records)
    assert {s.key.decode() for s in paced} == {c for c in ids if in_sample(c, 0.05)}
    assert {dict(s.headers)[PI] for s in paced} == {b"0.05"}
    assert hot.judge_slice(closed, judge_accepting=False, records=records) == []
    assert metrics.registry.get_sample_value("convmon_conversations_routed_total",
                                             {"route": "budget_exhausted"}) == len(sends)


def test_the_judged_record_carries_pi_and_the_weighted_sums_are_exported_beside_raw_counts() -> None:
    stage, metrics = judge_stage(SimulatedJudge(RUBRIC))
    raw = orjson.dumps(complaint_conversation("x1").model_dump(mode="json"))
    headers = [(WEIGHT, b"4.0"), (PI, b"0.25"), (SAMPLED_BY, b"uncertainty")]
    out = asyncio.run(judged(stage, raw, b"x1", 0, headers))
    score = decode_score(out.scores[0].value, RUBRIC)
    assert (score.inclusion_probability, score.sampled_by, score.sample_weight) == (0.25, "uncertainty", 4.0)
    assert orjson.loads(out.scores[0].value)["schema_version"] == 3
    assert out.scores[0].headers == [("convmon-score-id", b"llm:x1")]  # the stable id consumers dedupe on
    label = orjson.loads(out.labels[0].value)["score"]
    assert (label["inclusion_probability"], label["sampled_by"]) == (0.25, "uncertainty")
    # an old request (weight only) was a hash-slice pick
    old = asyncio.run(judged(stage, orjson.dumps(complaint_conversation("x2").model_dump(mode="json")), b"x2", 0,
                                   [(WEIGHT, b"20.0")]))
    old_score = decode_score(old.scores[0].value, RUBRIC)
    assert (old_score.inclusion_probability, old_score.sampled_by) == (0.05, "hash")
    r = metrics.registry
    assert r.get_sample_value("convmon_conversations_scored_total", {"scorer": "llm"}) == 2  # raw n
    assert r.get_sample_value("convmon_conversations_scored_weight_total", {"scorer": "llm"}) == 24.0
    assert r.get_sample_value("convmon_conversations_scored_weight_squared_total", {"scorer": "llm"}) == 416.0
    hajek_rate = r.get_sample_value("convmon_rubric_weighted_probability_sum_total",
                                    {"rubric": "dsat.negative_feedback", "polarity": "dsat", "scorer": "llm"}) / 24.0
    assert hajek_rate == 1.0  # both conversations carry the item


def test_judge_failures_are_counted_as_non_response_with_their_weight() -> None:
    stage, metrics = judge_stage(FailingJudge())
    out = asyncio.run(judged(stage, orjson.dumps(complaint_conversation("f").model_dump(mode="json")), b"f", 0,
                                   [(WEIGHT, b"2.0"), (PI, b"0.5"), (SAMPLED_BY, b"feedback")]))
    assert out.scores == [] and [d.reason for d in out.dead] == ["judge_http_error"]
    r = metrics.registry
    assert r.get_sample_value("convmon_judge_nonresponse_total", {"reason": "judge_http_error"}) == 1
    assert r.get_sample_value("convmon_judge_nonresponse_weight_total") == 2.0


def test_codec_v3_only_for_records_with_pi_and_v2_still_reads() -> None:
    distilled = scored_record("d", 0.3)
    assert orjson.loads(encode_score(distilled, RUBRIC))["schema_version"] == 2
    v2 = orjson.loads(encode_score(distilled, RUBRIC))
    v2["pi"] = 0.5
    with pytest.raises(ValueError, match="only in schema_version 3"):
        decode_score(orjson.dumps(v2), RUBRIC)
    judged = distilled.model_copy(update={"scorer": "llm", "inclusion_probability": 0.2, "sampled_by": "hash",
                                          "sample_weight": 5.0})
    assert decode_score(encode_score(judged, RUBRIC), RUBRIC) == judged.model_copy(
        update={"items": decode_score(encode_score(judged, RUBRIC), RUBRIC).items,
                "scored_at": round(judged.scored_at, 3)})


def revoked(metrics: Metrics) -> float | None:
    metrics.unscored.labels("partition_revoked")  # the series exists (at 0) even when nothing was revoked
    return metrics.registry.get_sample_value("convmon_conversations_unscored_total", {"reason": "partition_revoked"})


def verdict_counted(stage: JudgeStage, raw: bytes, key: bytes, partition: int,
                    headers: list[tuple[str, bytes]]) -> bool:
    """What the engine does with a judge record: the judge loop's verdict, counted by its partition's writer."""
    verdict, _ = asyncio.run(stage.verdict(raw, key, partition, headers))
    assert verdict is not None
    return stage.count(verdict.score, verdict.partition, verdict.shadow)


def test_a_verdict_is_counted_in_its_input_partition_whatever_judge_partition_carried_it() -> None:
    """An input topic of 12 partitions (or 1) and convmon's 4: the judge record names its source input
    partition, and its verdict is counted there by that partition's owner, once, whatever judge partition
    brought it; a worker that does not own the source partition leaves it to the owner."""
    stage, metrics = judge_stage(SimulatedJudge(RUBRIC), owned=frozenset({11}))
    raw = orjson.dumps(complaint_conversation("s1").model_dump(mode="json"))
    headers = [(WEIGHT, b"1.0"), (PI, b"1.0"), (SAMPLED_BY, b"hash"), (SOURCE_PARTITION, b"11")]
    assert verdict_counted(stage, raw, b"s1", 3, headers)
    assert not verdict_counted(stage, raw, b"s1", 2, headers)  # redelivered through another judge partition: once
    stage.totals.written()()  # on the broker: exported (runtime/checkpoint.py)
    assert metrics.registry.get_sample_value("convmon_partition_conversations_scored_total",
                                             {"partition": "11", "scorer": "llm"}) == 1
    assert revoked(metrics) == 0
    assert metrics.registry.get_sample_value("convmon_duplicate_scores_total", {"scorer": "llm"}) == 1
    other, other_metrics = judge_stage(SimulatedJudge(RUBRIC), owned=frozenset({3}))
    assert not verdict_counted(other, raw, b"s1", 3, headers)  # owns judge partition 3, not input partition 11
    assert other_metrics.registry.get_sample_value("convmon_partition_conversations_scored_total",
                                                   {"partition": "3", "scorer": "llm"}) is None
    assert revoked(other_metrics) == 1


def test_judge_records_name_their_input_partition_and_go_to_the_same_judge_partition() -> None:
    metrics = Metrics(CollectorRegistry())
    hot = HotPath(Sessionizer(MemStore(), Limits(), idle_timeout_s=10.0, closed_retention_s=60.0,
                              allowed_lateness_s=2.0),
                  DedupWindow(MemStore(), window_s=1.0, max_keys=10), PartitionTotals(MemStore(), []),
                  Exporter(metrics, dimensions=[], cap=5, rubric=RUBRIC), metrics, RUBRIC,
                  max_event_bytes=10_000, max_request_bytes=1 << 20, sample_rate=1.0)
    sends = hot.judge_slice([(complaint_conversation("a"), 7), (complaint_conversation("b"), 0)], judge_accepting=True)
    assert [(dict(s.headers)[SOURCE_PARTITION], s.partition) for s in sends] == [(b"7", 7), (b"0", 0)]
