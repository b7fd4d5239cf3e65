from __future__ import annotations

import orjson
import pytest

from monitor.contracts.score_codec import decode_score, encode_score
from monitor.contracts.scores import ItemResult
from tests.support.score_records import EVALUATOR, RUBRIC, record


def test_compact_records_are_small_and_round_trip() -> None:
    rec = record(shadow=True, sample_weight=10.0, feedback={"thumbs": "down"})
    raw = encode_score(rec, RUBRIC)
    assert len(raw) <= 600 and orjson.loads(raw)["schema_version"] == 2 and orjson.loads(raw)["scorer"] == "distilled"
    assert decode_score(raw, RUBRIC) == rec


def test_judge_records_with_scores_uncertain_and_missing_items_round_trip() -> None:
    items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=None if j == 1 else j % 2 == 0,
                        score=7.0 if j % 2 == 0 else 0.0, uncertain=j == 1) for j, i in enumerate(RUBRIC.items[:-2])]
    rec = record(scorer="llm", judge="openai:gpt-4o-mini", items=items, satisfaction=0.61,
                 tokens={"prompt": 900, "completion": 120}, cost_usd=0.0002)
    assert decode_score(encode_score(rec, RUBRIC), RUBRIC) == rec
    empty = record(items=[])
    assert decode_score(encode_score(empty, RUBRIC), RUBRIC) == empty


def test_the_full_form_of_the_first_releases_is_no_longer_read() -> None:
    with pytest.raises(ValueError, match="unknown schema_version None"):
        decode_score(record().model_dump_json().encode(), RUBRIC)


@pytest.mark.parametrize("raw", [b"{", b"[]", b'{"schema_version": 9}',
                                 b'{"schema_version": 2, "rubric_set": "other", "rubric_version": "1"}'])
def test_garbage_is_a_value_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        decode_score(raw, RUBRIC)


def test_a_judge_record_with_its_evaluator_is_version_4_and_round_trips() -> None:
    rec = record(scorer="llm", judge="openai:gpt-4o-mini", evaluator=EVALUATOR, inclusion_probability=0.5,
                 sampled_by="hash")
    raw = orjson.loads(encode_score(rec, RUBRIC))
    assert raw["schema_version"] == 4 and raw["ev"] == EVALUATOR.model_dump() and raw["pi"] == 0.5
    assert decode_score(encode_score(rec, RUBRIC), RUBRIC) == rec


def test_records_from_before_the_evaluator_still_decode_without_one() -> None:
    v3 = record(scorer="llm", judge="openai:gpt-4o-mini", inclusion_probability=0.5, sampled_by="hash")
    raw = orjson.loads(encode_score(v3, RUBRIC))
    assert raw["schema_version"] == 3 and "ev" not in raw
    assert decode_score(orjson.dumps(raw), RUBRIC).evaluator is None
    with pytest.raises(ValueError, match="ev appears only in schema_version 4"):
        decode_score(orjson.dumps({**raw, "ev": EVALUATOR.model_dump()}), RUBRIC)
    with pytest.raises(ValueError):  # a bad evaluator is a bad record, never a crash
        decode_score(orjson.dumps({**raw, "schema_version": 4, "ev": {"model": "x"}}), RUBRIC)
