"""The judge loop's commit point and the verdict records between the judge and the partition writers."""

from __future__ import annotations

from aiokafka import TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.engine.loops import Offsets
from monitor.stages.judging import Verdict
from monitor.stages.sends import DISTILLED, SOURCE_PARTITION
from monitor.stages.verdicts import BadVerdict, read_verdict, verdict_record

TP = TopicPartition("judge", 0)


def test_the_commit_point_is_the_first_offset_not_finished() -> None:
    offsets = Offsets()
    for o in (5, 6, 7):
        offsets.take(TP, o)
    offsets.finish(TP, 6)
    assert offsets.committable() == {}  # 5 still in flight: nothing past it may commit
    offsets.finish(TP, 5)
    assert offsets.committable() == {TP: 7}
    offsets.finish(TP, 7)
    assert offsets.committable() == {TP: 8}
    assert offsets.committable() == {}


@given(st.permutations(list(range(20))), st.integers(0, 20))
def test_never_commits_past_an_unfinished_call(order: list[int], finished: int) -> None:
    offsets = Offsets()
    for o in range(20):
        offsets.take(TP, 100 + o)
    done = set(order[:finished])
    for o in done:
        offsets.finish(TP, 100 + o)
    point = offsets.committable().get(TP)
    first_open = min(set(range(20)) - done, default=20)
    assert point == (100 + first_open if first_open else None)


def score() -> ScoreRecord:
    return ScoreRecord(conversation_id="c-1", scorer="llm", judge="openai:m", rubric_set="r", rubric_version="1",
                       model_version="m", R=8.0,
                       items=[ItemResult(item_id="sat.gratitude", polarity="sat", verdict=True, score=8)])


def test_a_verdict_goes_to_its_source_partition_and_reads_back_the_same() -> None:
    verdict = Verdict(score(), 3, {"sat.gratitude": 0.25})
    send = verdict_record(verdict)
    assert send.partition == 3
    assert dict(send.headers)[SOURCE_PARTITION] == b"3" and DISTILLED in dict(send.headers)
    back = read_verdict(send.value, send.headers, 3)
    assert back == Verdict(verdict.score, 3, {"sat.gratitude": 0.25})


def test_a_garbled_or_foreign_verdict_is_refused_with_a_reason() -> None:
    assert isinstance(read_verdict(b"{not json", [], 0), BadVerdict)
    distilled = score().model_copy(update={"scorer": "distilled"})
    refused = read_verdict(distilled.model_dump_json().encode(), [], 0)
    assert isinstance(refused, BadVerdict) and "not 'llm'" in refused.detail


def test_a_record_fetched_again_is_not_taken_twice() -> None:
    """After a seek back the fetcher returns offsets already in flight: taking them again would stall the commit
    point for ever."""
    offsets = Offsets()
    assert offsets.take(TP, 5) and offsets.take(TP, 6)
    assert not offsets.take(TP, 5) and not offsets.take(TP, 6)
    offsets.finish(TP, 5)
    offsets.finish(TP, 6)
    assert offsets.committable() == {TP: 7}
