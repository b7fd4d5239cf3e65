"""Turning extracted raw answers into validated ``ItemResult``\\ s, one function per answer scale.

SPUR (A.3): Y with a 1-10 score, N scores 0; maxims: satisfied / violated / not applicable;
RUBICON-style Likert: 1-5 agreement mapped to 0 / 2.5 / 5 / 7.5 / 10. Every item must be answered
exactly once (the same answer repeated is tolerated, conflicting answers are not); otherwise
:func:`monitor.judge.parse.fail` lists what is wrong, for the repair prompt.
"""

from __future__ import annotations

from collections.abc import Callable

from monitor.contracts.errors import JudgeResponseError
from monitor.contracts.rubric_set import RubricItem
from monitor.contracts.scores import ItemResult
from monitor.judge.parse import LIKERT_SCORES, LIKERT_WORDS, RawAnswer, extract, fail

_YES = {"y", "yes", "true"}
_NO = {"n", "no", "false"}
_SATISFIED = {"s", "satisfied", "y", "yes", "true"}
_VIOLATED = {"v", "violated", "n", "no", "false"}
_NOT_APPLICABLE = {"na", "n/a", "not applicable"}

Interpreter = Callable[[RubricItem, RawAnswer], "ItemResult | str"]


def _spur(item: RubricItem, raw: RawAnswer) -> ItemResult | str:
    answer = raw.answer.lower()
    if item.polarity == "maxim":
        verdict = True if answer in _SATISFIED else False if answer in _VIOLATED else None
        if verdict is None and answer not in _NOT_APPLICABLE:
            return f"item {item.id}: answer {raw.answer[:20]!r} is not S, V or NA"
        return ItemResult(item_id=item.id, polarity=item.polarity, verdict=verdict)
    score = raw.score
    if answer not in _YES | _NO:
        try:
            score = float(answer)  # a bare number: 0 means N, 1-10 means Y with that score
        except ValueError:
            return f"item {item.id}: answer {raw.answer[:20]!r} is not Y or N"
        answer = "y" if score > 0 else "n"
    if answer in _NO:
        return ItemResult(item_id=item.id, polarity=item.polarity, verdict=False, score=0.0)
    if score is None or not 1 <= score <= 10:
        return f"item {item.id}: a Y answer needs a score from 1 to 10, got {score}"
    return ItemResult(item_id=item.id, polarity=item.polarity, verdict=True, score=score)


def _likert(item: RubricItem, raw: RawAnswer) -> ItemResult | str:
    answer = " ".join(raw.answer.lower().split())
    level = LIKERT_WORDS.get(answer)
    if level is None:
        try:
            value = float(answer)
        except ValueError:
            value = -1.0
        level = int(value) if value in LIKERT_SCORES else None
    if level is None:
        return f"item {item.id}: rating {raw.answer[:20]!r} is not 1-5"
    return ItemResult(item_id=item.id, polarity=item.polarity, verdict=level >= 4, score=LIKERT_SCORES[level])


interpret_spur: Interpreter = _spur
interpret_likert: Interpreter = _likert


def collect(text: str, items: list[RubricItem], interpret: Interpreter) -> list[ItemResult]:
    """Every item's result in rubric order, or raise ``JudgeResponseError`` listing the problems."""
    raws, unknown = extract(text, items)
    problems: list[str] = []
    results: dict[str, ItemResult] = {}
    conflicting: set[str] = set()
    by_id = {item.id: item for item in items}
    for raw in raws:
        result = interpret(by_id[raw.item_id], raw)
        if isinstance(result, str):
            problems.append(result)
            continue
        previous = results.setdefault(raw.item_id, result)
        if previous != result:
            conflicting.add(raw.item_id)
    problems += [f"item {i} answered more than once with different answers" for i in sorted(conflicting)]
    problems += [f"unknown item {u[:60]}" for u in sorted(unknown)]
    answered = {raw.item_id for raw in raws}
    missing = [item.id for item in items if item.id not in answered]
    if not raws:
        problems.insert(0, "no answers found")
    elif missing:
        problems.append("missing items " + ", ".join(missing))
    if problems:
        raise fail(problems)
    return [results[item.id] for item in items]


def parse_spur(text: str, items: list[RubricItem]) -> list[ItemResult]:
    """SPUR A.3 answers (and maxims) for ``items``; raises ``JudgeResponseError``."""
    return collect(text, items, _spur)


def parse_likert(text: str, items: list[RubricItem]) -> list[ItemResult]:
    """5-point agreement answers for ``items``; raises ``JudgeResponseError``."""
    return collect(text, items, _likert)


__all__ = ["JudgeResponseError", "parse_likert", "parse_spur", "collect", "interpret_likert", "interpret_spur"]
