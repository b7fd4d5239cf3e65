"""Loaders for public, human-labelled conversation datasets used by tests and benchmarks.

The data itself lives outside the repository (``../shared/data``) and is never packaged.
"""

from __future__ import annotations

from pathlib import Path

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

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"  # beside the checkout

__all__ = [
    "SHARED_DATA",
    "UssDialogue",
    "UssFormatError",
    "UssTurn",
    "conversation_label",
    "load_uss",
    "parse_uss",
    "rated_prefixes",
    "turn_rating",
]
