"""The scores topic's bytes: pinned per case in tests/data/score_codec_golden.jsonl (items missing, unknown or out of
order, verdicts unknown, scores, probabilities, masses, uncertain items, every optional field, v2 and v3; v4 with
its evaluator is read back by the property below; a change
there is a wire-format change), and for any record, what decode_score reads back is the record at the format's
precision."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contracts.evaluator import PROVENANCE_FIELDS
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import SCHEMA_VERSION, decode_score, encode_score, score_id
from monitor.contracts.scores import ScoreRecord
from monitor.contracts.settings import REPO_ROOT, Settings

GOLDEN = [orjson.loads(line) for line in (REPO_ROOT / "tests/data/score_codec_golden.jsonl").read_bytes().splitlines()]
RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)


unit = st.floats(min_value=0.0, max_value=1.0)
maybe = st.one_of(st.none(), unit)


@st.composite
def items(draw: st.DrawFn) -> list[dict[str, Any]]:
    chosen = draw(st.lists(st.sampled_from(RUBRIC.items), unique_by=lambda i: i.id))
    out = [{"item_id": i.id, "polarity": i.polarity, "verdict": draw(st.one_of(st.none(), st.booleans())),
            "probability": draw(maybe), "score": draw(st.one_of(st.none(), st.floats(0.0, 10.0))),
            "mass": draw(maybe), "uncertain": draw(st.booleans())} for i in chosen]
    if draw(st.booleans()):
        out.append({"item_id": "sat.not_in_the_rubric", "polarity": "sat", "probability": draw(unit)})
    return out


@st.composite
def records(draw: st.DrawFn) -> ScoreRecord:
    text = st.text(max_size=8)
    optional = st.fixed_dictionaries({}, optional={
        "satisfaction": unit, "shadow": st.booleans(), "sample_weight": st.floats(1e-3, 1e3),
        "inclusion_probability": st.floats(1e-3, 1.0),
        "sampled_by": st.sampled_from(["hash", "uncertainty", "feedback"]),
        "metadata": st.dictionaries(text, text, max_size=3),
        "feedback": st.sampled_from([{}, {"thumbs": "up"}, {"csat": 2}]),
        "tokens": st.dictionaries(text, st.integers(0, 10**6), max_size=2), "cost_usd": st.floats(0.0, 1.0),
        "span": st.from_regex(r"\A[0-9a-f]{32}-[0-9a-f]{16}\Z"), "response_id": st.text(min_size=1, max_size=16),
        "latency_s": st.floats(0.0, 100.0), "incomplete": st.booleans(),
        "evaluator": st.fixed_dictionaries({name: text for name in PROVENANCE_FIELDS}),
        "revision": st.integers(1, 5)})
    return ScoreRecord.model_validate({
        "conversation_id": draw(text), "scorer": draw(st.sampled_from(["llm", "distilled"])), "judge": draw(text),
        "rubric_set": RUBRIC.id, "rubric_version": RUBRIC.version, "model_version": draw(text), "items": draw(items()),
        "R": draw(st.floats(-1e3, 1e3)), "scored_at": draw(st.floats(1.6e9, 2e9)), **draw(optional)})


@pytest.mark.parametrize("case", GOLDEN, ids=[case["case"] for case in GOLDEN])
def test_the_bytes_of_each_case_are_the_pinned_ones(case: dict[str, Any]) -> None:
    assert encode_score(ScoreRecord.model_validate(case["record"]), RUBRIC) == case["bytes"].encode()


def _at_wire_precision(record: ScoreRecord) -> dict[str, Any]:
    """The record as the compact form carries it: rubric items only, in the rubric's order, values rounded."""
    by_id = {i.item_id: i for i in record.items}
    items = [by_id[item_id].model_copy(update={
        "probability": None if by_id[item_id].probability is None else round(by_id[item_id].probability, 3),
        "score": None if by_id[item_id].score is None else round(by_id[item_id].score, 2),
        "mass": None if by_id[item_id].mass is None else round(by_id[item_id].mass, 3),
        "explanation": None}) for item_id in RUBRIC.item_ids if item_id in by_id]
    return record.model_copy(update={
        "items": items, "R": round(record.R, 4), "scored_at": round(record.scored_at, 3),
        "latency_s": round(record.latency_s, 6), "feedback": record.feedback or None, "ended_at": None,
    }).model_dump()


@settings(max_examples=200, deadline=None)
@given(records())
def test_any_record_reads_back_at_the_wire_precision(record: ScoreRecord) -> None:
    raw = encode_score(record, RUBRIC)
    sampled = record.inclusion_probability is not None or record.sampled_by is not None
    version = 5 if record.revision > 1 else 4 if record.evaluator else 3 if sampled else 2
    assert orjson.loads(raw)["schema_version"] == version
    assert decode_score(raw, RUBRIC).model_dump() == _at_wire_precision(record)


def test_a_revision_is_in_the_score_id_and_written_only_as_version_5() -> None:
    case = next(c for c in GOLDEN if c["case"] == "distilled_revision_3")
    record = ScoreRecord.model_validate(case["record"])
    assert SCHEMA_VERSION == 5 and orjson.loads(case["bytes"])["rv"] == 3
    assert score_id(record) == "distilled:c-1#r3"
    assert score_id(record.model_copy(update={"revision": 1})) == "distilled:c-1"  # the id of before revisions
    assert decode_score(case["bytes"].encode(), RUBRIC).revision == 3
    v4 = orjson.loads(case["bytes"]) | {"schema_version": 4}
    with pytest.raises(ValueError, match="rv appears only"):
        decode_score(orjson.dumps(v4), RUBRIC)
