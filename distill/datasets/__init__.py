"""Loaders for public, human-labelled conversation datasets used by tests and benchmarks.

The data itself lives outside the repository (``../shared/data``) and is never packaged.
"""

from __future__ import annotations

from distill.datasets.uss import (
    UssDialogue,
    UssFormatError,
    UssTurn,
    conversation_label,
    load_uss,
    parse_uss,
    rated_prefixes,
    turn_rating,
)

__all__ = [
    "UssDialogue",
    "UssFormatError",
    "UssTurn",
    "conversation_label",
    "load_uss",
    "parse_uss",
    "rated_prefixes",
    "turn_rating",
]
