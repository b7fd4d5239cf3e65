"""The corrected rate's terms: the hot path sends the distilled probabilities with a judge record, the judge stage
counts the verdict's residuals y - f (weighted by 1/pi) in the input partition's totals, and only there."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import RESIDUAL_TERMS
from monitor.judge.simulated import SimulatedJudge
from monitor.stages.judging import distilled_probabilities
from monitor.stages.sampler import InclusionPolicy
from monitor.stages.sends import DISTILLED
from tests.support.hot_path import RUBRIC, complaint_conversation, judge_stage, judged, routed_hot_path, scored_record

ITEM = "dsat.negative_feedback"  # complaint_conversation's simulated truth: the judge says yes, every other item no


def test_a_judge_record_carries_the_probabilities_the_hot_path_scored_it_with() -> None:
    hot, _ = routed_hot_path(InclusionPolicy(base_rate=1.0))
    closed = [(complaint_conversation("a"), 0), (complaint_conversation("b"), 0)]
    sends = hot.judge_slice(closed, judge_accepting=True, records=[scored_record("a", 0.25)])
    headers = {s.key.decode(): dict(s.headers) for s in sends}
    assert orjson.loads(headers["a"][DISTILLED]) == {i.id: 0.25 for i in RUBRIC.items}
    assert DISTILLED not in headers["b"]  # no model scored it: its verdict adds no residual


def _partition_value(registry: CollectorRegistry, term: str, item: str) -> float | None:
    name = RESIDUAL_TERMS[term][0] + "_total"
    polarity = next(i.polarity for i in RUBRIC.items if i.id == item)
    return registry.get_sample_value(name, {"partition": "0", "rubric": item, "polarity": polarity})


def test_the_verdicts_residuals_are_counted_in_the_partition_totals_with_their_weights() -> None:
    stage, metrics = judge_stage(SimulatedJudge(RUBRIC))
    shadow = {i.id: 0.25 for i in RUBRIC.items}
    for cid, weight in (("x1", 4.0), ("x2", 10.0)):
        raw = orjson.dumps(complaint_conversation(cid).model_dump(mode="json"))
        headers = [("convmon-sample-weight", repr(weight).encode()), ("convmon-inclusion-probability",
                                                                      repr(1 / weight).encode()),
                   ("convmon-sampled-by", b"hash"), (DISTILLED, orjson.dumps(shadow))]
        asyncio.run(judged(stage, raw, cid.encode(), 0, headers))
        asyncio.run(judged(stage, raw, cid.encode(), 0, headers))  # redelivered: counted once
    # a record with no (or a garbled) header is still counted as a verdict, with no residual
    for cid, extra in (("x3", []), ("x4", [(DISTILLED, b"{not json")])):
        raw = orjson.dumps(complaint_conversation(cid).model_dump(mode="json"))
        asyncio.run(judged(stage, raw, cid.encode(), 0, [("convmon-sample-weight", b"4.0"), *extra]))
    r = metrics.registry
    assert _partition_value(r, "residual_weight", ITEM) is None  # not exported before the broker has it
    stage.totals.written()()
    assert r.get_sample_value("convmon_partition_conversations_scored_total", {"partition": "0", "scorer": "llm"}) == 4
    # y = 1 for the truth item, 0 elsewhere; f = 0.25; w = 4 and 10, so q = w (w - 1) = 12 and 90
    for item, y in ((ITEM, 1.0), ("dsat.repetition", 0.0)):
        want = {"residual_weight": 14.0, "residual_yes": 14.0 * y, "residual_probability": 3.5,
                "residual_design_weight": 102.0, "residual_design_yes": 102.0 * y, "residual_design_probability": 25.5,
                "residual_design_squares": 102.0 * (y - 0.25) ** 2}
        got = {term: _partition_value(r, term, item) for term in RESIDUAL_TERMS}
        assert got == pytest.approx(want), item  # a term still at zero is exported at 0 (increase() sees its birth)
    # the terms are partition totals only: no per-worker twin
    assert not [m.name for m in r.collect() if m.name.startswith("convmon_rubric_residual")]


@pytest.mark.parametrize("raw", [b"[1, 2]", b'{"a": "x", "b": true, "c": 1.5, "d": -0.1}', b"\xff"])
def test_a_header_that_is_not_item_probabilities_adds_nothing(raw: bytes) -> None:
    assert distilled_probabilities([(DISTILLED, raw)]) == {}


def test_only_probabilities_in_the_unit_interval_are_read() -> None:
    assert distilled_probabilities([(DISTILLED, b'{"a": 0, "b": 1, "c": 0.5, "d": 2}')]) == {"a": 0.0, "b": 1.0,
                                                                                            "c": 0.5}


def test_a_weight_below_one_adds_no_term_so_no_counter_goes_down() -> None:
    """A weight header below 1 (no pi: records routed before pi was sent, or a malformed one) is not 1/pi: its
    q = w (w - 1) would be negative. The verdict is counted; the corrected rate's terms are not."""
    stage, metrics = judge_stage(SimulatedJudge(RUBRIC))
    raw = orjson.dumps(complaint_conversation("low").model_dump(mode="json"))
    shadow = orjson.dumps({i.id: 0.25 for i in RUBRIC.items})
    asyncio.run(judged(stage, raw, b"low", 0, [("convmon-sample-weight", b"0.5"), (DISTILLED, shadow)]))
    stage.totals.written()()
    r = metrics.registry
    assert r.get_sample_value("convmon_partition_conversations_scored_total", {"partition": "0", "scorer": "llm"}) == 1
    assert _partition_value(r, "residual_weight", ITEM) is None
