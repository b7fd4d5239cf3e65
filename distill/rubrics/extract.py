"""SPUR supervised extraction (Lin et al. 2024, Appendix A.1): why was this labelled user (dis)satisfied?

Input is a file of labelled conversations: JSONL (a convmon ``Conversation`` per line plus a
``label``, or its ``feedback`` thumbs / CSAT) or a USS ``.txt`` file (SPUR Appendix B labels, with
the contradiction cut). One call per SAT or DSAT conversation asks for at most ``max_reasons``
reasons between ``<REASONS>`` tags, or NONE; the label's polarity picks the wording. Text is
redacted before it is put in a prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from distill.rubrics.cache import CachingClient
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation
from monitor.contracts.sections import JudgeSettings, RubricSettings
from monitor.judge.gather import gather_or_cancel
from monitor.judge.prompt import conversation_budget, conversation_message, render
from monitor.judge.redact import Redactor

Label = Literal["SAT", "DSAT"]
_LABELS: dict[str, str] = {
    "sat": "SAT", "satisfied": "SAT", "positive": "SAT", "up": "SAT", "thumbs_up": "SAT",
    "dsat": "DSAT", "dissatisfied": "DSAT", "negative": "DSAT", "down": "DSAT", "thumbs_down": "DSAT",
    "neutral": "NEUTRAL",
}
FEELING = {
    "SAT": ("satisfied", "satisfaction", "thumbs-up"),
    "DSAT": ("dissatisfied", "dissatisfaction", "thumbs-down"),
}
EXTRACTION_MAX_TOKENS = 400
_REASONS = re.compile(r"<REASONS>(.*?)(?:</REASONS>|$)", re.S | re.I)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")


@dataclass(frozen=True)
class Labeled:
    conversation: Conversation
    label: Label


@dataclass(frozen=True)
class Pattern:
    """One extracted reason: what the user did that showed (dis)satisfaction."""

    conversation_id: str
    label: Label
    text: str


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _label_of(obj: dict[str, Any], where: str) -> str:
    raw = obj.pop("label", None)
    if raw is None:
        feedback = obj.get("feedback") or {}
        raw = feedback.get("thumbs")
        csat = feedback.get("csat")
        if raw is None and isinstance(csat, int):
            raw = "sat" if csat >= 4 else "dsat" if csat <= 2 else "neutral"
    label = _LABELS.get(str(raw).strip().lower()) if raw is not None else None
    if label is None:
        raise ConfigError(f"{where}: needs a 'label' (SAT, DSAT or NEUTRAL; up/down also accepted) or feedback "
                          f"thumbs/csat. Got {raw!r} instead.")
    return label


def _load_jsonl(path: Path) -> list[tuple[Conversation, str]]:
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{where}: not JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise ConfigError(f"{where}: expected a JSON object")
        label = _label_of(obj, where)
        obj.setdefault("type", "conversation")
        try:
            out.append((Conversation.model_validate(obj), label))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ConfigError(f"{where}: field '{'.'.join(map(str, err['loc']))}': {err['msg']}") from exc
    return out


def _load_uss(path: Path) -> list[tuple[Conversation, str]]:
    from distill.datasets.uss import load_uss

    return [(d.to_conversation(cut=True), d.label) for d in load_uss(path)]


def load_labeled(path: Path, *, limit: int | None = None) -> tuple[list[Labeled], dict[str, int]]:
    """SAT and DSAT conversations of a labelled file, and counts by label (NEUTRAL ones are dropped)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"labelled file {path} not found")
    rows = _load_uss(path) if path.suffix == ".txt" else _load_jsonl(path)
    rows = rows[:limit] if limit else rows
    counts = {"SAT": 0, "DSAT": 0, "NEUTRAL": 0}
    for _, label in rows:
        counts[label] += 1
    kept = [Labeled(c, label) for c, label in rows if label in ("SAT", "DSAT")]  # type: ignore[arg-type]
    if not any(x.label == "SAT" for x in kept) or not any(x.label == "DSAT" for x in kept):
        raise ConfigError(f"{path}: rubric learning needs SAT and DSAT conversations; found {counts}")
    return kept, counts


def context_message(rubrics: RubricSettings) -> dict[str, str]:
    """The system message naming the product's domain (Settings.domain_description)."""
    return {"role": "system", "content": render(rubrics.prompts_dir, "rubric_context",
                                                domain=rubrics.domain_description)}


def extraction_messages(judge: JudgeSettings, rubrics: RubricSettings, item: Labeled, redactor: Redactor, *,
                        max_reasons: int = 3) -> list[dict[str, str]]:
    feeling, noun, signal = FEELING[item.label]
    values = {"feeling": feeling, "feeling_noun": noun, "signal": signal, "max_reasons": max_reasons}
    static = render(rubrics.prompts_dir, "spur_extraction", conversation="", **values)
    budget = conversation_budget(judge.judge_max_prompt_chars, static)
    block, _ = conversation_message(rubrics.prompts_dir, redactor.redact_conversation(item.conversation),
                                    max_chars=budget)
    user = render(rubrics.prompts_dir, "spur_extraction", conversation=block, **values)
    return [context_message(rubrics), {"role": "user", "content": user}]


def parse_reasons(text: str, max_reasons: int = 3) -> list[str] | None:
    """Reasons between ``<REASONS>`` tags (NONE gives ``[]``); None when there are no tags.

    >>> parse_reasons("<REASONS>\\n- thanks the agent\\n- books the hotel\\n</REASONS>")
    ['thanks the agent', 'books the hotel']
    >>> parse_reasons("<REASONS>NONE</REASONS>"), parse_reasons("no tags")
    ([], None)
    """
    match = _REASONS.search(text)
    if match is None:
        return None
    body = match.group(1).strip()
    if not body or body.strip(" .").upper() == "NONE":
        return []
    reasons = [_BULLET.sub("", line).strip() for line in body.splitlines()]
    return [r for r in reasons if r and r.upper() != "NONE"][:max_reasons]


@dataclass
class ExtractionResult:
    patterns: list[Pattern]
    answers: int = 0  # conversations asked
    none: int = 0  # conversations answered NONE
    unparseable: int = 0  # dropped: no <REASONS> block
    cut_off: int = 0  # dropped: still cut off at the output limit after a retry with a larger one

    @property
    def dropped(self) -> dict[str, int]:
        return {"cut_off": self.cut_off, "unparseable": self.unparseable}


async def extract_patterns(
    llm: CachingClient, judge: JudgeSettings, rubrics: RubricSettings, data: list[Labeled], *, model: str,
    max_reasons: int = 3,
    on_done: Callable[[], None] | None = None,
) -> ExtractionResult:
    """One extraction call per conversation, concurrently (the judge client bounds concurrency)."""
    redactor = Redactor.from_settings(judge)
    result = ExtractionResult(patterns=[], answers=len(data))

    async def one(item: Labeled) -> None:
        messages = extraction_messages(judge, rubrics, item, redactor, max_reasons=max_reasons)
        completion = await llm.complete_whole(messages, model=model, max_tokens=EXTRACTION_MAX_TOKENS)
        reasons = None if completion is None else parse_reasons(completion.text, max_reasons)
        if completion is None:
            result.cut_off += 1
        elif reasons is None:
            result.unparseable += 1
        elif not reasons:
            result.none += 1
        result.patterns.extend(Pattern(item.conversation.conversation_id, item.label, r) for r in reasons or [])
        if on_done is not None:
            on_done()

    await gather_or_cancel(one(item) for item in data)
    result.patterns.sort(key=lambda p: (p.conversation_id, p.label, p.text))  # completion order is not stable
    return result
