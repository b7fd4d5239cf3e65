"""Tolerant parsing of judge answers: JSON (bare, fenced or embedded), lists and tables of lines.

Extraction finds (item, raw answer, score) triples whatever the format; interpretation turns them
into ``ItemResult``\\ s for one mode (SPUR Y/N + 1-10, maxims S/V/NA, Likert 1-5). Anything unusable
raises :class:`JudgeResponseError` listing the problems (item ids only, never conversation text);
no other exception escapes, which a hypothesis test pins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from monitor.contracts.errors import JudgeResponseError
from monitor.contracts.rubric_set import RubricItem

LIKERT_SCORES = {1: 0.0, 2: 2.5, 3: 5.0, 4: 7.5, 5: 10.0}
LIKERT_WORDS = {
    "strongly disagree": 1, "disagree": 2, "neutral": 3, "neither agree nor disagree": 3, "agree": 4,
    "strongly agree": 5,
}
_ANSWER_KEYS = ("answer", "verdict", "value", "response", "label", "y/n", "yn", "rating", "agreement", "result")
_SCORE_KEYS = ("score", "intensity", "strength", "points")
_NAME_KEYS = ("id", "item_id", "item", "name", "criterion", "statement", "rubric", "question", "key")
_ID_LIKE = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9_]+$")
_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.S)
_SEP = re.compile(r"\s*(?::|\||=>|->|=|\s[-–—]\s)\s*")
_VERDICT = re.compile(
    r"^(?P<v>strongly\s+agree|strongly\s+disagree|neither\s+agree\s+nor\s+disagree|not\s+applicable|n/a|"
    r"agree|disagree|neutral|satisfied|violated|yes|no|true|false|na|y|n|s|v|\d+(?:\.\d+)?)(?![\w.])",
    re.I,
)
_SCORE = re.compile(r"^[\s,;:()\[\]/\-–—]*(?:(?:score|intensity)\s*[:=]?\s*)?(?P<s>\d+(?:\.\d+)?)(?!\.\d)", re.I)
_MAX_JSON_STARTS = 50


@dataclass(frozen=True)
class RawAnswer:
    item_id: str
    answer: str
    score: float | None = None


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


class _Resolver:
    """Maps an item label as the model wrote it (id, name, any case/punctuation) to an item id."""

    def __init__(self, items: list[RubricItem]) -> None:
        self.keys: dict[str, str] = {}
        suffixes: dict[str, list[str]] = {}
        for item in items:
            self.keys[_norm(item.id)] = item.id
            self.keys.setdefault(_norm(item.name), item.id)
            suffixes.setdefault(_norm(item.id.split(".", 1)[1]), []).append(item.id)
        for suffix, ids in suffixes.items():
            if len(ids) == 1:
                self.keys.setdefault(suffix, ids[0])
        self._by_length = sorted((k for k in self.keys if len(k) >= 4), key=len, reverse=True)

    def __call__(self, label: str) -> str | None:
        key = _norm(label)
        if not key or len(key) > 200:
            return None
        if key in self.keys:
            return self.keys[key]
        stripped = key.lstrip("0123456789")
        if stripped in self.keys:
            return self.keys[stripped]
        return next((self.keys[k] for k in self._by_length if k in key), None)


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float | str) and not isinstance(value, bool):
        return str(value).strip()
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*", value)
        return float(m.group(1)) if m else None
    return None


def _answer_from_value(item_id: str, value: Any) -> RawAnswer | None:
    """The answer for one item from a JSON value: dict, "Y, 8" string, number, bool or [answer, score]."""
    if isinstance(value, dict):
        lowered = {str(k).lower(): v for k, v in value.items()}
        answer = next((lowered[k] for k in _ANSWER_KEYS if k in lowered), None)
        score = next((_number(lowered[k]) for k in _SCORE_KEYS if k in lowered), None)
        if answer is None and score is not None:
            return RawAnswer(item_id, str(score), None)
        text = _scalar(answer)
        return RawAnswer(item_id, text, score) if text is not None else None
    if isinstance(value, list) and value:
        text = _scalar(value[0])
        return RawAnswer(item_id, text, _number(value[1]) if len(value) > 1 else None) if text else None
    text = _scalar(value)
    if text is None:
        return None
    return _answer_from_text(item_id, text) or RawAnswer(item_id, text, None)


def _walk(obj: Any, resolve: _Resolver, out: list[RawAnswer], unknown: set[str], depth: int = 0) -> None:
    if depth > 8:
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            item_id = resolve(str(key))
            if item_id is not None:
                answer = _answer_from_value(item_id, value)
                if answer is not None:
                    out.append(answer)
            elif _ID_LIKE.match(str(key)):
                unknown.add(str(key))
            elif isinstance(value, dict | list):
                _walk(value, resolve, out, unknown, depth + 1)
    elif isinstance(obj, list):
        for element in obj:
            if isinstance(element, dict):
                lowered = {str(k).lower(): v for k, v in element.items()}
                label = next((lowered[k] for k in _NAME_KEYS if isinstance(lowered.get(k), str)), None)
                item_id = resolve(label) if label is not None else None
                if item_id is not None:
                    answer = _answer_from_value(item_id, {k: v for k, v in lowered.items() if k not in _NAME_KEYS})
                    if answer is not None:
                        out.append(answer)
                    continue
                if label is not None and _ID_LIKE.match(label):
                    unknown.add(label)
                    continue
            _walk(element, resolve, out, unknown, depth + 1)


def _json_candidates(text: str) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    chunks = [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    for chunk in chunks:
        try:
            yield json.loads(chunk)
            continue
        except (ValueError, RecursionError):
            pass
        starts = [i for i, ch in enumerate(chunk) if ch in "{["][:_MAX_JSON_STARTS]
        for start in starts:
            try:
                yield decoder.raw_decode(chunk, start)[0]
            except (ValueError, RecursionError):
                continue


def _answer_from_text(item_id: str, rest: str) -> RawAnswer | None:
    m = _VERDICT.match(rest.strip().strip("*`_").strip())
    if not m:
        return None
    after = rest.strip().strip("*`_").strip()[m.end():]
    s = _SCORE.match(after.lstrip("*`_"))
    score = float(s.group("s")) if s else None
    return RawAnswer(item_id, re.sub(r"\s+", " ", m.group("v")), score)


def _from_table_row(line: str, resolve: _Resolver) -> RawAnswer | None:
    cells = [c.strip().strip("*`_ ") for c in line.strip().strip("|").split("|")]
    for i, cell in enumerate(cells):
        item_id = resolve(cell) if not re.fullmatch(r"[\d\s.]*", cell) else None
        if item_id is None:
            continue
        for j in range(i + 1, len(cells)):
            m = _VERDICT.fullmatch(cells[j])
            if m:
                score = next((_number(c) for c in cells[j + 1 :] if _number(c) is not None), None)
                return RawAnswer(item_id, m.group("v"), score)
        return None
    return None


def _from_line(line: str, resolve: _Resolver) -> RawAnswer | None:
    line = re.sub(r"^\s*(?:[-*•>#]+\s*|\(?\d+[.)]\s*)*", "", line.replace("**", "").replace("`", ""))
    for m in _SEP.finditer(line):
        item_id = resolve(line[: m.start()]) if m.start() > 0 else None
        if item_id is not None:
            answer = _answer_from_text(item_id, line[m.end():])
            if answer is not None:
                return answer
    words = line.rsplit(None, 2)  # "Gratitude Y 8" / "Gratitude N"
    for cut in (len(words) - 2, len(words) - 1):
        if cut >= 1:
            item_id = resolve(" ".join(words[:cut]))
            answer = _answer_from_text(item_id, " ".join(words[cut:])) if item_id else None
            if answer is not None:
                return answer
    return None


def _from_lines(text: str, resolve: _Resolver) -> list[RawAnswer]:
    out = []
    for line in text.splitlines()[:2000]:
        if len(line) > 2000:
            continue
        answer = _from_table_row(line, resolve) if line.count("|") >= 2 else None
        answer = answer or _from_line(line, resolve)
        if answer is not None:
            out.append(answer)
    return out


def extract(text: str, items: list[RubricItem]) -> tuple[list[RawAnswer], set[str]]:
    """Raw answers found in a judge's text, and id-like keys that name no rubric item.

    The JSON candidate with the most answers wins; free-text lines are the fallback.
    """
    resolve = _Resolver(items)
    best: list[RawAnswer] = []
    best_unknown: set[str] = set()
    for candidate in _json_candidates(text):
        found: list[RawAnswer] = []
        unknown: set[str] = set()
        _walk(candidate, resolve, found, unknown)
        if len({a.item_id for a in found}) > len({a.item_id for a in best}):
            best, best_unknown = found, unknown
    if len({a.item_id for a in best}) == len(items):
        return best, best_unknown
    lines = _from_lines(text, resolve)
    if len({a.item_id for a in lines}) > len({a.item_id for a in best}):
        return lines, set()
    return best, best_unknown


def fail(problems: list[str]) -> JudgeResponseError:
    """The error for an unusable answer; ``.problems`` keeps the full list for the repair prompt."""
    shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    err = JudgeResponseError(f"judge answer unusable: {shown}")
    err.problems = problems  # type: ignore[attr-defined]
    return err
