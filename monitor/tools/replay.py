"""`convmon replay PATH`: produce a dataset file as events, in original turn order.

Formats:

* **USS** (``*.txt``; Sun et al., SIGIR 2021): read by :func:`distill.datasets.load_uss`, the one
  USS reader the benchmarks use too. Conversation ids are the dataset's (``<FILE>-<4-digit index>``),
  USER becomes ``user``, SYSTEM ``assistant``; the overall rating (most frequent, ties to the lower)
  becomes the end event's CSAT feedback. Empty utterances are left out of the events (an event needs
  text) and counted in :attr:`Replay.empty_utterances`.
* **JSONL** (``*.jsonl``): one JSON object per line, each a turn event, an end event or a whole
  conversation, exactly as on the input topic (see the README, "Input events").

Every line is validated before anything is produced; errors name the file, line and field.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from distill.datasets import UssDialogue, load_uss, turn_rating
from monitor.contracts.errors import ConfigError, InvalidEvent
from monitor.contracts.events import decode_event


@dataclass(frozen=True)
class Replay:
    """The events of a dataset file, and what of it they leave out."""

    events: list[dict[str, Any]]
    empty_utterances: int = 0


def uss_events(dialogues: list[UssDialogue], *, app: str, start_time: float = 1.7e9) -> Iterator[dict[str, Any]]:
    """Turn and end events of USS dialogues, one dialogue after the other, 1 s between turns."""
    for n, dialogue in enumerate(dialogues):
        t0 = start_time + n * 1000
        turns = dialogue.to_conversation().turns
        for turn in turns:
            yield {"type": "turn", "conversation_id": dialogue.dialogue_id, "turn_index": turn.index,
                   "role": turn.role, "text": turn.text, "timestamp": t0 + turn.index,
                   "metadata": {"app": app} if turn.index == 0 else {}}
        end: dict[str, Any] = {"type": "end", "conversation_id": dialogue.dialogue_id, "timestamp": t0 + len(turns) + 1}
        if dialogue.overall:
            end["feedback"] = {"csat": turn_rating(dialogue.overall)}
        yield end


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                decode_event(raw.rstrip(b"\n"))
            except InvalidEvent as exc:
                raise ConfigError(f"{path}:{lineno}: {exc.detail}") from exc
            yield orjson.loads(raw)


def read_dataset(path: Path) -> Replay:
    """All events of a file, validated up front so a bad line produces nothing."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if path.suffix == ".jsonl":
        return Replay(list(read_jsonl(path)))
    if path.suffix == ".txt":
        dialogues = load_uss(path)
        return Replay(list(uss_events(dialogues, app=path.stem)), sum(d.empty_turns for d in dialogues))
    raise ConfigError(f"{path}: unknown format {path.suffix!r}; expected .jsonl (events) or .txt (USS)")
