"""trusted_record: the distilled scorer's unvalidated records equal validated ones, field for field and byte for byte
on the scores topic, for any values of the types the scorer produces."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import encode_score
from monitor.contracts.scores import ScoreRecord, trusted_item, trusted_record
from monitor.contracts.settings import Settings

RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)
text = st.text(min_size=0, max_size=12)
probability = st.one_of(st.sampled_from([0.0, 1.0, 0.5, 0.0005, 0.9995, 1e-300]),
                        st.floats(min_value=0.0, max_value=1.0))
finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)


@st.composite
def scorer_output(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    chosen = draw(st.lists(st.sampled_from(RUBRIC.items), unique_by=lambda i: i.id, max_size=len(RUBRIC.items)))
    items = [{"item_id": i.id, "polarity": i.polarity, "probability": draw(probability), "verdict": draw(st.booleans())}
             for i in chosen]
    feedback = draw(st.one_of(st.none(), st.fixed_dictionaries({}, optional={
        "thumbs": st.sampled_from(["up", "down"]), "csat": st.integers(1, 5)})))
    fields = {
        "scorer": "distilled", "judge": draw(st.sampled_from(["hashing", "embedding", "tfidf"])),
        "rubric_set": RUBRIC.id, "rubric_version": RUBRIC.version, "model_version": draw(text),
        "latency_s": draw(st.floats(min_value=0.0, max_value=10.0)), "conversation_id": draw(text.filter(bool)),
        "R": draw(finite), "shadow": draw(st.booleans()),
        "sample_weight": draw(st.one_of(st.just(1.0), st.floats(min_value=1e-6, max_value=1e6))),
        "metadata": draw(st.dictionaries(text, text, max_size=4)), "feedback": feedback or None,
        "ended_at": draw(st.one_of(st.none(), st.floats(min_value=0.0, max_value=4e9))),
        "span": draw(st.one_of(st.none(), st.from_regex(r"\A[0-9a-f]{32}-[0-9a-f]{16}\Z"))),
        "response_id": draw(st.one_of(st.none(), st.text(min_size=1, max_size=128))),
        "scored_at": draw(st.floats(min_value=1.6e9, max_value=2e9)),
    }
    return fields, items


@settings(max_examples=300, deadline=None)
@given(scorer_output())
def test_trusted_records_equal_validated_ones_and_encode_to_the_same_bytes(
        output: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    fields, items = output
    trusted = trusted_record(fields, [trusted_item(**item) for item in items])
    validated = ScoreRecord.model_validate({**fields, "items": items})
    assert trusted == validated and trusted.model_fields_set == validated.model_fields_set
    assert list(trusted.__dict__) == list(validated.__dict__)
    assert [(i.__dict__, i.model_fields_set) for i in trusted.items] == [
        (i.__dict__, i.model_fields_set) for i in validated.items]
    assert encode_score(trusted, RUBRIC) == encode_score(validated, RUBRIC)
    assert trusted.model_dump_json() == validated.model_dump_json()  # the full (v1) form too
    shadow, validated_shadow = (r.model_copy(update={"shadow": True}) for r in (trusted, validated))  # mark_shadows
    assert encode_score(shadow, RUBRIC) == encode_score(validated_shadow, RUBRIC) and trusted.shadow == fields["shadow"]


def test_defaults_are_filled_as_validation_fills_them() -> None:
    fields = {"scorer": "distilled", "judge": "hashing", "rubric_set": RUBRIC.id, "rubric_version": RUBRIC.version,
              "model_version": "v1", "latency_s": 0.001, "conversation_id": "c", "R": 0.25}
    items = [{"item_id": RUBRIC.items[0].id, "polarity": RUBRIC.items[0].polarity, "probability": 0.25,
              "verdict": False}]
    trusted = trusted_record(fields, [trusted_item(**items[0])])
    validated = ScoreRecord.model_validate({**fields, "items": items})
    assert abs(trusted.scored_at - validated.scored_at) < 5.0  # both stamped now by the default factory
    assert trusted.model_copy(update={"scored_at": 1.0}) == validated.model_copy(update={"scored_at": 1.0})
    assert trusted.tokens == {} and trusted.tokens is not validated.tokens and trusted.items[0].score is None
    assert trusted.model_fields_set == validated.model_fields_set
    with pytest.raises(TypeError, match="not ScoreRecord fields"):
        trusted_record({**fields, "R2": 1.0}, [])
    with pytest.raises(KeyError):
        trusted_record({k: v for k, v in fields.items() if k != "R"}, [])
