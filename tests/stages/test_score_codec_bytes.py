"""encode_score's bytes on the scores topic equal those of the encoder before it was made one-pass (#31), for any
record: items missing, unknown or in any order, verdicts unknown, scores, probabilities, masses, uncertain items,
and every optional field. ``reference_encode`` is that encoder, verbatim."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contracts.evaluator import PROVENANCE_FIELDS
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.score_codec import SCHEMA_VERSION, decode_score, encode_score
from monitor.contracts.scores import ScoreRecord
from monitor.contracts.settings import Settings

RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)


def _mask(flags: list[bool]) -> int:
    return sum(1 << j for j, flag in enumerate(flags) if flag)


def _r(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def reference_encode(record: ScoreRecord, rubric: RubricSet) -> bytes:
    """The compact bytes of ``record`` (v3 when it carries an inclusion probability, else v2); items the
    rubric set does not know are not representable and dropped
    (the exporter skips and counts them before a record is encoded)."""
    by_id = {item.item_id: item for item in record.items}
    items = [by_id.get(item_id) for item_id in rubric.item_ids]
    out: dict[str, Any] = {
        "schema_version": 2, "conversation_id": record.conversation_id, "scorer": record.scorer,
        "judge": record.judge, "rubric_set": record.rubric_set, "rubric_version": record.rubric_version,
        "model_version": record.model_version, "R": round(record.R, 4),
        "y": _mask([bool(i and i.verdict) for i in items]),
        "k": _mask([i is not None and i.verdict is not None for i in items]),
        "scored_at": round(record.scored_at, 3), "latency_s": round(record.latency_s, 6),
    }
    if any(i is not None and i.probability is not None for i in items):
        out["p"] = [_r(i.probability, 3) if i else None for i in items]
    if any(i is not None and i.score is not None for i in items):
        out["s"] = [_r(i.score, 2) if i else None for i in items]
    if any(i is not None and i.mass is not None for i in items):
        out["ms"] = [_r(i.mass, 3) if i else None for i in items]
    if any(i is not None and i.uncertain for i in items):
        out["u"] = _mask([bool(i and i.uncertain) for i in items])
    if not any(i is not None for i in items):
        out["n"] = 0  # no items at all (kept apart from "every item present")
    elif any(i is None for i in items):
        out["n"] = _mask([i is not None for i in items])
    optional = {"satisfaction": record.satisfaction, "feedback": record.feedback or None,
                "metadata": record.metadata or None, "tokens": record.tokens or None,
                "cost_usd": record.cost_usd or None, "span": record.span, "response_id": record.response_id}
    out.update({k: v for k, v in optional.items() if v is not None})
    if record.shadow:
        out["shadow"] = True
    if record.sample_weight != 1.0:
        out["sample_weight"] = record.sample_weight
    if record.inclusion_probability is not None or record.sampled_by is not None:
        out["schema_version"] = 3
        if record.inclusion_probability is not None:
            out["pi"] = record.inclusion_probability
        if record.sampled_by is not None:
            out["by"] = record.sampled_by
    if record.evaluator is not None:
        out["schema_version"] = SCHEMA_VERSION
        out["ev"] = record.evaluator.model_dump()
    return orjson.dumps(out)


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
        "latency_s": st.floats(0.0, 100.0),
        "evaluator": st.fixed_dictionaries({name: text for name in PROVENANCE_FIELDS})})
    return ScoreRecord.model_validate({
        "conversation_id": draw(text), "scorer": draw(st.sampled_from(["llm", "distilled"])), "judge": draw(text),
        "rubric_set": RUBRIC.id, "rubric_version": RUBRIC.version, "model_version": draw(text), "items": draw(items()),
        "R": draw(st.floats(-1e3, 1e3)), "scored_at": draw(st.floats(1.6e9, 2e9)), **draw(optional)})


@settings(max_examples=500, deadline=None)
@given(records())
def test_the_bytes_equal_the_earlier_encoders(record: ScoreRecord) -> None:
    raw = encode_score(record, RUBRIC)
    assert raw == reference_encode(record, RUBRIC)
    assert orjson.loads(raw)["schema_version"] in (2, 3, SCHEMA_VERSION)
    known = record.model_copy(update={"items": [i for i in record.items if i.item_id in RUBRIC.item_ids]})
    back = decode_score(raw, RUBRIC)
    assert back.evaluator == record.evaluator
    assert [i.item_id for i in back.items] == [i for i in RUBRIC.item_ids if i in {j.item_id for j in known.items}]
