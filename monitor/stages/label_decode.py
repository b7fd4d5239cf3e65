"""Label-topic records decoded for the label sink; anything that is not a JSON object is a dead letter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from monitor.stages.deadletter import DeadLetter, dead_letter


def decode_labels(records: Sequence[tuple[bytes | None, bytes | None]], *,
                  max_bytes: int) -> tuple[list[dict[str, Any]], list[DeadLetter]]:
    labels: list[dict[str, Any]] = []
    bad: list[DeadLetter] = []
    for key, raw in records:
        try:
            obj = orjson.loads(raw or b"")
        except orjson.JSONDecodeError as exc:
            bad.append(dead_letter(raw, key, reason="malformed_json", detail=str(exc), stage="labels",
                                   max_bytes=max_bytes))
            continue
        if not isinstance(obj, dict):
            bad.append(dead_letter(raw, key, reason="invalid_schema", detail="expected a JSON object",
                                   stage="labels", max_bytes=max_bytes))
            continue
        labels.append(obj)
    return labels, bad
