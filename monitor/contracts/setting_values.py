"""The value types behind settings: list forms accepted from the environment, scorer names, prices.

Kept apart from the sections so a section module stays a list of fields, and ``split_commas`` can be
used (and doctested) without building settings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator
from pydantic_settings import NoDecode

REPO_ROOT = Path(__file__).resolve().parents[2]

# USD per million tokens (input, output). Override or extend with CONVMON_JUDGE_PRICES.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
}


_OPEN, _CLOSE = "([{", ")]}"
RETRAIN_OFF = ("", "off", "none", "false", "0")  # values of retrain_cron that turn scheduled retraining off


def split_commas(text: str) -> list[str]:
    """Comma-separated values, trimmed; commas inside brackets or after a backslash do not split.

    So a regular expression keeps its quantifier (``\\d{3,4}``) or character class (``[,;]``).

    >>> split_commas("gpt-4o-mini, gpt-4.1-mini")
    ['gpt-4o-mini', 'gpt-4.1-mini']
    >>> split_commas(r"ACME-\\d{3,4}, ZZ[,;]\\w+,a\\,b")
    ['ACME-\\\\d{3,4}', 'ZZ[,;]\\\\w+', 'a\\\\,b']
    """
    parts: list[str] = []
    current: list[str] = []
    depth, escaped = 0, False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _string_list(value: object) -> object:
    """A list setting from the environment: a JSON list (``["a","b"]``) or the comma form (``a,b``)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"starts with '[' but is not a JSON list ({exc.msg}); write a,b or [\"a\",\"b\"]"
                             ) from None
    return split_commas(text)


# A list of strings that accepts ``a,b`` as well as a JSON list from CONVMON_* variables.
StringList = Annotated[list[str], NoDecode, BeforeValidator(_string_list)]
# The same forms, for a list of scorers (llm, distilled).
ScorerName = Literal["llm", "distilled"]
SCORERS: tuple[ScorerName, ...] = ("llm", "distilled")
ScorerList = Annotated[list[ScorerName], NoDecode, BeforeValidator(_string_list)]
