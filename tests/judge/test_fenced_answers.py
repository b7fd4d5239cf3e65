"""Hostile answers around a code fence: one JSON object alone in one fence is the answer, nothing else is.

A differential property test: ``load_answer`` (strict, no prose stripping) must accept exactly the texts an
independent, line-based reading of the rule accepts (bare JSON, or an opening fence line with an optional
language tag, one JSON object, and the same fence closing on the last line), for texts built from the
pieces a steered judge would combine (fences, tags, prose, braces, second objects, line breaks).
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.judge.strict import load_answer

ANSWER = {"sat.gratitude": {"answer": "Y", "score": 7}, "dsat.repetition": {"answer": "N", "score": 0}}
_OPENING = re.compile(r"(`{3,}|~{3,})[\w+.#-]*[ \t\r]*")


def oracle(text: str) -> Any:
    """What the rule accepts, read line by line: the object, or None."""
    text = text.strip()
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    lines = text.split("\n")
    opening = _OPENING.fullmatch(lines[0])
    if len(lines) < 3 or opening is None or lines[-1].lstrip(" \t") != opening.group(1):
        return None
    try:
        value = json.loads("\n".join(lines[1:-1]))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def read(text: str) -> tuple[Any, list[tuple[str, str]], float]:
    metrics = Metrics(CollectorRegistry())
    value, problems = load_answer(text.strip(), strip_prose=False, metrics=metrics)
    fences = metrics.registry.get_sample_value("convmon_judge_answer_repairs_total", {"kind": "fence_removed"})
    return value, problems, fences or 0.0


PIECES = st.sampled_from([
    "```", "```json", "```JSON ", "~~~", "````", "```python", "\n", " ", "\t", "\r\n", json.dumps(ANSWER),
    json.dumps(ANSWER, indent=2), '{"note": "the assistant was perfect"}', "[1, 2]", "Sure! Here it is:",
    "Hope this helps.", "{", "}", '"', "json",
])
ANSWERS = st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=12).map("".join)


@given(ANSWERS)
def test_only_what_the_rule_allows_is_read(text: str) -> None:
    value, problems, fences = read(text)
    expected = oracle(text)
    if expected is None:
        assert problems and fences == 0, (text, value)
    else:  # bare JSON of any type goes on to schema validation; a fenced value is an object
        assert not problems and json.dumps(value, sort_keys=True) == json.dumps(expected, sort_keys=True), text


@given(st.text(max_size=40), st.text(max_size=40), st.from_regex(r"[\w+.#-]{0,10}", fullmatch=True))
def test_anything_around_a_fenced_answer_is_prose(before: str, after: str, tag: str) -> None:
    text = f"{before}```{tag}\n{json.dumps(ANSWER)}\n```{after}"
    value, problems, fences = read(text)
    if before.strip() or after.strip():
        assert problems and fences == 0, text
    else:
        assert not problems and value == ANSWER and fences == 1, text


@given(st.text(min_size=1, max_size=40).filter(lambda s: s.strip()))
def test_anything_inside_the_fence_beside_the_object_is_prose(note: str) -> None:
    for body in (f"{note}\n{json.dumps(ANSWER)}", f"{json.dumps(ANSWER)}\n{note}"):
        text = f"```json\n{body}\n```"
        _, problems, fences = read(text)
        assert problems and fences == 0 and oracle(text) is None, text
