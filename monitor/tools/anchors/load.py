"""Anchor sets from JSON lines: a finished conversation and its human item labels on each line.

    {"conversation": {"conversation_id": "c1", "turns": [...]}, "labels": {"dsat.repeat": true, ...}}

The conversation follows the input contract (docs/input.md); ``labels`` maps rubric item ids to the human
verdict (items left out are unlabelled). Text and metadata are redacted and the id replaced by its keyed
reference here, as the set is read, so the label store never holds them raw. ``simulated_anchors`` writes
such lines from the simulator's ground truth.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from distill.anchor_store import Anchor
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import RubricSet
from monitor.judge.redact import Redactor, redact_conversation
from monitor.tools.simulator.generate import ConversationGenerator


class AnchorLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation: Conversation
    labels: dict[str, bool]


def file_version(path: Path) -> str:
    """The default version of a set: the first 12 hex digits of the file's SHA-256."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def read_anchors(path: Path, rubric: RubricSet, *, redactor: Redactor, ref: Callable[[str], str]) -> list[Anchor]:
    """Every line of ``path`` as a redacted anchor; the first bad line raises ``ConfigError`` naming it."""
    anchors: list[Anchor] = []
    seen: set[str] = set()
    known = set(rubric.item_ids)
    for number, line in _lines(path):
        where = f"{path}:{number}"
        try:
            parsed = AnchorLine.model_validate(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not JSON ({exc})") from exc
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"{where}: field '{field}': {err['msg']}") from exc
        unknown = sorted(set(parsed.labels) - known)
        if unknown:
            raise ConfigError(f"{where}: field 'labels': items {unknown} are not in rubric set {rubric.key}")
        key = ref(parsed.conversation.conversation_id)
        if key in seen:
            raise ConfigError(f"{where}: field 'conversation.conversation_id': a conversation appears twice")
        seen.add(key)
        clean = redact_conversation(parsed.conversation, redactor).model_copy(update={"conversation_id": key})
        anchors.append(Anchor(key, clean, dict(parsed.labels)))
    if not anchors:
        raise ConfigError(f"{path}: no anchors (one JSON object a line)")
    return anchors


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    for number, line in enumerate(raw.splitlines(), start=1):
        if line.strip():
            yield number, line


def simulated_anchors(rubric: RubricSet, count: int, *, seed: int = 0) -> Iterator[bytes]:
    """``count`` anchor lines from the simulator, labelled with its ground truth (for the demo)."""
    generator = ConversationGenerator(rubric, seed=seed)
    for n in range(count):
        sim = generator.generate(f"anchor-{seed}-{n}", 1_700_000_000.0 + n)
        turns = [{"index": e["turn_index"], "role": e["role"], "text": e["text"], "timestamp": e["timestamp"]}
                 for e in sim.events if e["type"] == "turn"]
        conversation = {"conversation_id": sim.conversation_id, "turns": turns, "simulated_truth": sim.truth,
                        "metadata": sim.events[0]["metadata"]}
        labels = {item: item in sim.truth for item in rubric.item_ids}
        yield orjson.dumps({"conversation": conversation, "labels": labels})
