"""`convmon replay PATH`: produce a dataset file as events, in original turn order.

Formats:

* **USS** (``*.txt``; Sun et al., SIGIR 2021): read by :func:`distill.datasets.load_uss`, the one
  USS reader the benchmarks use too. Conversation ids are the dataset's (``<FILE>-<4-digit index>``),
  USER becomes ``user``, SYSTEM ``assistant``; the overall rating (most frequent, ties to the lower)
  becomes the end event's CSAT feedback. Empty utterances are left out of the events (an event needs
  text) and counted in :attr:`Replay.empty_utterances`.
* **JSONL** (``*.jsonl``): one JSON object per line, each a turn event, an end event or a whole
  conversation, exactly as on the input topic (docs/input.md).
* **OpenAI chat logs** (``--format openai``, JSONL): each line also may be a Chat Completions conversation
  (``messages``) or one message of one (monitor/contracts/openai_chat.py); they are produced as convmon
  events, so any worker reads them. Messages that are not turns (system, tool, ...) are left out and counted.

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
from typing import Any, Literal

import orjson

from distill.datasets import UssDialogue, load_uss, turn_rating
from monitor.contracts.errors import ConfigError, InvalidEvent
from monitor.contracts.events import RejectedTurn, decode_event
from monitor.contracts.openai_chat import decode_chat, is_chat

Format = Literal["json", "openai", "uss"]


@dataclass(frozen=True)
class Replay:
    """The events of a dataset file, and what of it they leave out."""

    events: list[dict[str, Any]]
    empty_utterances: int = 0
    skipped_messages: int = 0  # chat messages that are not turns


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


def checked_line(raw: bytes, path: Path, lineno: int) -> dict[str, Any]:
    """One line's event, validated as the input topic would validate it; errors name the file and line."""
    try:
        event = decode_event(raw.rstrip(b"\n"))
    except InvalidEvent as exc:
        raise ConfigError(f"{path}:{lineno}: {exc.detail}") from exc
    if isinstance(event, RejectedTurn):
        raise ConfigError(f"{path}:{lineno}: field 'type': 'rejected' is convmon's own record, not an input event")
    obj: dict[str, Any] = orjson.loads(raw)
    return obj


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if raw.strip():
                yield checked_line(raw, path, lineno)


def read_chat(path: Path) -> Replay:
    """A JSONL file of Chat Completions conversations or messages (and convmon events), as convmon events."""
    events: list[dict[str, Any]] = []
    skipped = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
                if not isinstance(obj, dict) or not is_chat(obj):
                    events.append(checked_line(raw, path, lineno))
                    continue
                chat = decode_chat(obj, timestamp=0.0)
            except orjson.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{lineno}: not JSON: {exc}") from exc
            except InvalidEvent as exc:
                raise ConfigError(f"{path}:{lineno}: {exc.detail}") from exc
            skipped += len(chat.skipped)
            for event in chat.events:
                out = event.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
                out["type"] = event.type
                if "messages" not in obj and obj.get("timestamp", obj.get("created")) is None:
                    out.pop("timestamp", None)  # the broker record's time stands in, as for the original
                events.append(out)
    return Replay(events, skipped_messages=skipped)


def without_times(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` with its own times removed: the broker record's time stands in (relative-time replay)."""
    out = {k: v for k, v in event.items() if k not in ("timestamp", "started_at", "ended_at")}
    if isinstance(out.get("turns"), list):
        out["turns"] = [{k: v for k, v in t.items() if k != "timestamp"} if isinstance(t, dict) else t
                        for t in out["turns"]]
    return out


def read_dataset(path: Path, *, relative_time: bool = False, fmt: Format | None = None) -> Replay:
    """All events of a file, validated up front so a bad line produces nothing. ``fmt``: ``json`` (convmon
    events), ``openai`` (Chat Completions logs) or ``uss``; None: by the file's suffix."""
    replay = _read(path, fmt)
    if relative_time:
        return Replay([without_times(e) for e in replay.events], replay.empty_utterances, replay.skipped_messages)
    return replay


def _read(path: Path, fmt: Format | None) -> Replay:
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if fmt is None:
        fmt = {".jsonl": "json", ".txt": "uss"}.get(path.suffix)  # type: ignore[assignment]
    if fmt == "json":
        return Replay(list(read_jsonl(path)))
    if fmt == "openai":
        return read_chat(path)
    if fmt == "uss":
        dialogues = load_uss(path)
        return Replay(list(uss_events(dialogues, app=path.stem)), sum(d.empty_turns for d in dialogues))
    raise ConfigError(f"{path}: unknown format {path.suffix!r}; expected .jsonl (events) or .txt (USS), or name one "
                      "with --format json|openai|uss")
