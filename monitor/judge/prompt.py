"""Prompt rendering: templates, rubric sections, and the delimited, truncated conversation block.

Static text (instructions + rubric) goes in the system message and never varies between
conversations, so providers can cache the prefix; the conversation is the last message.

The conversation cannot close its block or pose as instructions: every turn is one JSON line
(newlines and quotes escaped, ``<`` and ``>`` written as ``\\u003c`` / ``\\u003e``), between marker
lines carrying a per-request random nonce. A turn can neither contain a marker line nor guess the nonce.
"""

from __future__ import annotations

import json
import secrets
from functools import cache
from pathlib import Path
from string import Template

from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.rubric_set import RubricItem

SECTION_TITLES = {
    "sat": "SATISFACTION RUBRIC",
    "dsat": "DISSATISFACTION RUBRIC",
    "maxim": "CONVERSATIONAL MAXIMS (about the assistant's turns)",
}
_CUT = " [... {n} characters cut ...] "
_MIN_CONVERSATION_CHARS = 1000


@cache
def load_template(prompts_dir: Path, name: str) -> Template:
    """``prompts/templates/<name>.txt`` as a ``string.Template`` (``${var}`` placeholders)."""
    path = Path(prompts_dir) / "templates" / f"{name}.txt"
    if not path.is_file():
        raise ConfigError(f"prompt template {name!r} not found at {path}; check prompts_dir (CONVMON_PROMPTS_DIR)")
    return Template(path.read_text(encoding="utf-8"))


def render(prompts_dir: Path, name: str, **values: object) -> str:
    """Fill a template; a missing placeholder is a programming error and raises ``KeyError``."""
    return load_template(prompts_dir, name).substitute({k: str(v) for k, v in values.items()})


def rubric_sections(items: list[RubricItem]) -> str:
    """Items grouped by polarity under the SPUR headings, one ``- [id] Name: description`` line each."""
    out: list[str] = []
    for polarity, title in SECTION_TITLES.items():
        group = [item for item in items if item.polarity == polarity]
        if not group:
            continue
        out.append(f"\n# {title}")
        out.extend(f"- [{item.id}] {item.name}: {item.description}" for item in group)
    return "\n".join(out) + "\n"


def spur_answer_format(items: list[RubricItem], *, explanations: int = 0) -> str:
    """The JSON answer shape for SPUR mode, with an example built from the first items; with
    ``explanations`` (a character bound) each answer also gives its reason as ``"why"``."""
    lines = ["Answer with one JSON object with one key per statement id, and no other text:"]
    example: dict[str, dict[str, object]] = {}
    why: dict[str, object] = {"why": "one short sentence"} if explanations else {}
    for item in items:
        if item.polarity == "maxim":
            example.setdefault(item.id, {"answer": "S", "score": 0, **why})
        elif item.polarity == "sat" and not any(k.startswith("sat.") for k in example):
            example[item.id] = {"answer": "Y", "score": 7, **why}
        elif item.polarity == "dsat" and not any(k.startswith("dsat.") for k in example):
            example[item.id] = {"answer": "N", "score": 0, **why}
    lines.append(json.dumps(example) + "  (and so on for every id)")
    if explanations:
        lines.append(f'"why" is the reason for that answer in one short sentence of at most {explanations} '
                     "characters; describe what happened, do not copy text from the conversation.")
    if any(item.polarity != "maxim" for item in items):
        lines.append('For rubric statements "answer" is "Y" or "N" and "score" an integer: 1-10 for Y, 0 for N.')
    if any(item.polarity == "maxim" for item in items):
        lines.append(
            'For maxims "answer" is "S" (satisfied), "V" (violated) or "NA" (not applicable), and "score" is 0.'
        )
    return "\n".join(lines)


def new_nonce() -> str:
    """A fresh random delimiter code: conversation text cannot predict it."""
    return secrets.token_hex(8)


def encode_turn(turn: Turn, text: str | None = None) -> str:
    """One JSON line for a turn, with angle brackets escaped so no text can form a marker line."""
    line = json.dumps({"turn": turn.index, "role": turn.role, "text": turn.text if text is None else text},
                      ensure_ascii=False)
    return line.replace("<", "\\u003c").replace(">", "\\u003e").replace("\u2028", "\\u2028").replace(
        "\u2029", "\\u2029"
    )


def _clip(turn: Turn, allowance: int) -> str:
    """Encode a turn within ``allowance`` characters, keeping its head and tail around a visible cut.

    Escaping makes encoded length non-linear in the text (``<`` costs six characters), so the number
    of kept characters is found by bisection.
    """
    text = turn.text

    def encoded(keep: int) -> str:
        half = keep // 2
        tail = text[len(text) - half :] if half else ""
        return encode_turn(turn, text[: keep - half] + _CUT.format(n=len(text) - keep) + tail)

    line = encode_turn(turn)
    if len(line) <= allowance:
        return line
    lo, hi = 0, len(text) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(encoded(mid)) <= allowance:
            lo = mid
        else:
            hi = mid - 1
    return encoded(lo)


def render_turns(conversation: Conversation, max_chars: int) -> tuple[str, bool]:
    """The turn lines within ``max_chars``: all of them, or the first and last turns around a marker.

    Turns are added alternately from the start and the end while they fit; the omitted middle
    becomes one ``{"omitted_turns": n}`` line; a single turn too long on its own keeps its head and
    tail. Returns the text and whether anything was cut.
    """
    lines = [encode_turn(t) for t in conversation.turns]
    if sum(len(line) + 1 for line in lines) <= max_chars:
        return "\n".join(lines), False
    turns = conversation.turns
    marker_room = len(json.dumps({"omitted_turns": len(turns), "omitted_chars": 10**12})) + 2
    room = max_chars - marker_room
    if len(turns) == 1:
        return _clip(turns[0], max_chars), True
    first, last = lines[0], lines[-1]
    if len(first) + len(last) + 2 > room:
        first, last = _clip(turns[0], room // 2 - 1), _clip(turns[-1], room // 2 - 1)
    head, tail = [first], [last]
    used = len(first) + len(last) + 2
    lo, hi = 1, len(lines) - 2
    from_start = False
    while lo <= hi:
        index = lo if from_start else hi
        if used + len(lines[index]) + 1 > room:
            break
        used += len(lines[index]) + 1
        if from_start:
            head.append(lines[index])
            lo += 1
        else:
            tail.insert(0, lines[index])
            hi -= 1
        from_start = not from_start
    omitted = turns[lo : hi + 1]
    middle = []
    if omitted:
        cut = sum(len(t.text) for t in omitted)
        middle = [json.dumps({"omitted_turns": len(omitted), "omitted_chars": cut})]
    return "\n".join(head + middle + tail), True


def conversation_budget(max_prompt_chars: int, system_prompt: str) -> int:
    """Characters left for the conversation block once the static prompt is in."""
    budget = max_prompt_chars - len(system_prompt) - 200
    if budget < _MIN_CONVERSATION_CHARS:
        raise ConfigError(
            f"The judge_max_prompt_chars setting must leave at least {_MIN_CONVERSATION_CHARS} characters for the "
            f"conversation; the static prompt alone is {len(system_prompt)} characters. Got {max_prompt_chars} "
            "instead: raise CONVMON_JUDGE_MAX_PROMPT_CHARS or use a smaller rubric."
        )
    return budget


def conversation_message(
    prompts_dir: Path, conversation: Conversation, *, max_chars: int, nonce: str | None = None
) -> tuple[str, bool]:
    """The user message: the nonce-delimited, possibly truncated conversation. Returns (text, truncated)."""
    turns, truncated = render_turns(conversation, max_chars)
    return render(prompts_dir, "conversation", nonce=nonce or new_nonce(), turns=turns), truncated
