"""`convmon replay PATH`: produce a dataset file as events, in original turn order.

Formats:

* **USS** (``*.txt``; Sun et al., SIGIR 2021): read by :func:`distill.datasets.load_uss`, the one
  USS reader the benchmarks use too. Conversation ids are the dataset's (``<FILE>-<4-digit index>``),
  USER becomes ``user``, SYSTEM ``assistant``; the overall rating (most frequent, ties to the lower)
  becomes the end event's CSAT feedback. Empty utterances are left out of the events (an event needs
  text) and counted in :attr:`Replay.empty_utterances`.
* **JSONL** (``*.jsonl``): one JSON object per line, each a turn event, an end event or a whole
  conversation, exactly as on the input topic (docs/input.md).

Every line is validated before anything is produced; errors name the file, line and field.

``relative_time`` (``convmon replay --relative-time``) drops the file's own times: each turn and end event
then takes its broker record's time, the moment it is produced (docs/input.md), and a whole conversation
loses ``started_at`` / ``ended_at``. A data set from 2023 replayed that way is scored as live traffic:
``convmon_score_delay_seconds`` measures the pipeline, not the age of the data, and idle timeouts run on
the replay's clock.
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


def without_times(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` with its own times removed: the broker record's time stands in (relative-time replay)."""
    out = {k: v for k, v in event.items() if k not in ("timestamp", "started_at", "ended_at")}
    if isinstance(out.get("turns"), list):
        out["turns"] = [{k: v for k, v in t.items() if k != "timestamp"} if isinstance(t, dict) else t
                        for t in out["turns"]]
    return out


def read_dataset(path: Path, *, relative_time: bool = False) -> Replay:
    """All events of a file, validated up front so a bad line produces nothing."""
    replay = _read(path)
    if relative_time:
        return Replay([without_times(e) for e in replay.events], replay.empty_utterances)
    return replay


def _read(path: Path) -> Replay:
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if path.suffix == ".jsonl":
        return Replay(list(read_jsonl(path)))
    if path.suffix == ".txt":
        dialogues = load_uss(path)
        return Replay(list(uss_events(dialogues, app=path.stem)), sum(d.empty_turns for d in dialogues))
    raise ConfigError(f"{path}: unknown format {path.suffix!r}; expected .jsonl (events) or .txt (USS)")
