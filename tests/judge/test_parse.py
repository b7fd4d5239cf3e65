from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contracts.errors import JudgeResponseError
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import REPO_ROOT
from monitor.judge.interpret import parse_likert, parse_spur

CORPUS = Path(__file__).resolve().parents[1] / "data" / "judge_responses"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())
COPILOT = load_rubric_set("spur-copilot", REPO_ROOT / "prompts")
PARSERS = {"spur": parse_spur, "likert": parse_likert}


def test_every_corpus_file_has_an_expectation() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.txt")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus(name: str) -> None:
    case = EXPECTED[name]
    rubric = load_rubric_set(case["rubric"], REPO_ROOT / "prompts")
    items = rubric.items[: case.get("first", len(rubric.items))]
    text = (CORPUS / name).read_text()
    parse = PARSERS[case["mode"]]
    if "error" in case:
        with pytest.raises(JudgeResponseError, match=case["error"].replace("(", r"\(").replace(")", r"\)")) as info:
            parse(text, items)
        assert info.value.reason == "judge_unparseable"
        return
    results = parse(text, items)
    assert [r.item_id for r in results] == [i.id for i in items]
    if "verdicts" in case:
        assert {r.item_id: r.verdict for r in results} == {i.id: case["verdicts"].get(i.id, True) for i in items}
        return
    scores = {r.item_id: r.score for r in results}
    assert scores == {i.id: float(case["scores"].get(i.id, 0)) for i in items}
    if case["mode"] == "spur":
        assert all(r.verdict == (r.score > 0) for r in results)


def test_a_bare_number_means_yes_with_that_score_and_zero_means_no() -> None:
    answer = {i.id: 0 for i in COPILOT.items} | {"sat.gratitude": 7}
    results = parse_spur(json.dumps(answer), COPILOT.items)
    assert results[0].verdict is True and results[0].score == 7
    assert results[1].verdict is False and results[1].score == 0


def test_no_answers_with_a_non_zero_score_still_score_zero() -> None:
    answer = {i.id: {"answer": "N", "score": 5} for i in COPILOT.items}
    assert {r.score for r in parse_spur(json.dumps(answer), COPILOT.items)} == {0.0}


def test_the_same_answer_twice_is_tolerated() -> None:
    text = "\n".join(f"{i.name}: N, 0" for i in COPILOT.items) + "\nGratitude: N, 0"
    assert len(parse_spur(text, COPILOT.items)) == 20


def test_positive_and_negative_feedback_are_not_confused() -> None:
    text = "\n".join(f"{i.name}: N" for i in COPILOT.items if i.id != "dsat.negative_feedback")
    text += "\nNegative Feedback: Y, 9"
    results = {r.item_id: r for r in parse_spur(text, COPILOT.items)}
    assert results["dsat.negative_feedback"].score == 9 and results["sat.praise"].verdict is False


def test_error_message_is_bounded_and_names_only_ids() -> None:
    with pytest.raises(JudgeResponseError, match=r"judge answer unusable: no answers found$") as info:
        parse_spur("The user said: my password is hunter2", COPILOT.items)
    assert "hunter2" not in str(info.value)


def test_likert_rejects_out_of_scale_ratings() -> None:
    answer = {i.id: 4 for i in COPILOT.items[:10]} | {"sat.gratitude": 7}
    with pytest.raises(JudgeResponseError, match=r"item sat.gratitude: rating '7' is not 1-5"):
        parse_likert(json.dumps(answer), COPILOT.items[:10])


_names = st.sampled_from([i.name for i in COPILOT.items] + [i.id for i in COPILOT.items])
_fragments = st.one_of(
    st.text(max_size=40),
    _names,
    st.sampled_from(["Y", "N", "yes", "no", ": ", "|", "\n", "```json\n", "```", "{", "}", "[", "]", '"', ",", "10"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_fragments, max_size=60).map("".join))
def test_parser_never_raises_anything_but_judge_response_error(text: str) -> None:
    for parse in (parse_spur, parse_likert):
        try:
            results = parse(text, COPILOT.items)
        except JudgeResponseError:
            continue
        assert [r.item_id for r in results] == COPILOT.item_ids


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 20) | st.floats(allow_nan=True) | st.text(max_size=10) | _names,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.one_of(_names, st.text(max_size=8)), children,
                                                                        max_size=5),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(_json_values)
def test_parser_survives_arbitrary_json(value: object) -> None:
    text = json.dumps(value)
    try:
        parse_spur(text, COPILOT.items)
    except JudgeResponseError:
        pass
