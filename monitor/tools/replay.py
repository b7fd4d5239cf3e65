"""`convmon replay PATH`: produce a dataset file as events, in original turn order.

Formats:

* **USS** (``*.txt``; Sun et al., SIGIR 2021): ``ROLE<TAB>TEXT<TAB>ACTION<TAB>SATS`` lines, dialogues
  separated by blank lines, each ending with ``USER<TAB>OVERALL<TAB><TAB>r1,r2,...``. USER becomes
  ``user``, SYSTEM ``assistant``; the overall rating (most frequent, ties to the lower) becomes the
  end event's CSAT feedback.
* **JSONL** (``*.jsonl``): one JSON object per line, each a turn event, an end event or a whole
  conversation, exactly as on the input topic (see the README, "Input events").

Every line is validated before anything is produced; errors name the file, line and field.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from monitor.contracts.errors import ConfigError, InvalidEvent
from monitor.contracts.events import decode_event

USS_ROLES = {"USER": "user", "SYSTEM": "assistant"}


def _mode_low(ratings: list[int]) -> int:
    counts = Counter(ratings)
    best = max(counts.values())
    return min(r for r, c in counts.items() if c == best)


def read_uss(path: Path, *, start_time: float = 1.7e9) -> Iterator[dict[str, Any]]:
    """Events for every dialogue of a USS file; conversation ids are ``<FILE>-<n>``."""
    dialogue: list[tuple[int, list[str]]] = []
    n = 0
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 4:
                raise ConfigError(f"{path}:{lineno}: expected 4 tab-separated fields, got {len(fields)}")
            if fields[0] not in USS_ROLES:
                raise ConfigError(f"{path}:{lineno}: field 'ROLE': expected USER or SYSTEM, got {fields[0]!r}")
            dialogue.append((lineno, fields))
            if fields[0] == "USER" and fields[1] == "OVERALL":
                yield from _uss_dialogue(path, f"{path.stem}-{n}", dialogue, start_time + n * 1000)
                dialogue, n = [], n + 1
    if dialogue:
        raise ConfigError(f"{path}:{dialogue[-1][0]}: dialogue does not end with an OVERALL line")


def _uss_dialogue(path: Path, cid: str, lines: list[tuple[int, list[str]]], t0: float) -> Iterator[dict[str, Any]]:
    index = 0
    for _lineno, (role, text, _action, _sats) in lines[:-1]:
        if not text.strip():
            continue  # empty utterances carry nothing to judge
        yield {"type": "turn", "conversation_id": cid, "turn_index": index, "role": USS_ROLES[role],
               "text": text, "timestamp": t0 + index, "metadata": {"app": path.stem} if index == 0 else {}}
        index += 1
    lineno, overall = lines[-1]
    try:
        ratings = [int(r) for r in overall[3].split(",") if r.strip()]
    except ValueError as exc:
        raise ConfigError(f"{path}:{lineno}: field 'SATS': not a list of integers: {overall[3]!r}") from exc
    end: dict[str, Any] = {"type": "end", "conversation_id": cid, "timestamp": t0 + index + 1}
    if ratings:
        end["feedback"] = {"csat": _mode_low(ratings)}
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


def read_dataset(path: Path) -> list[dict[str, Any]]:
    """All events of a file, validated up front so a bad line produces nothing."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if path.suffix == ".jsonl":
        return list(read_jsonl(path))
    if path.suffix == ".txt":
        return list(read_uss(path))
    raise ConfigError(f"{path}: unknown format {path.suffix!r}; expected .jsonl (events) or .txt (USS)")
