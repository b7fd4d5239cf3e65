"""Dead letters: what a record that cannot be processed becomes, in one place.

The value is the original bytes, or a prefix of them when they would not fit one produce request
(``max_bytes``): the record itself must never be what crashes the agent. Headers (a public
contract): ``convmon-reason`` (a bounded code), ``convmon-stage``, ``convmon-detail`` (may quote
user text: never logged at INFO), ``convmon-original-bytes`` (the original size) and
``convmon-truncated`` (``1`` when the value is a prefix).
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_DETAIL = 2000
HEADROOM = 8192  # key, headers and the record batch's framing, inside the producer's max_request_size


@dataclass(frozen=True)
class DeadLetter:
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    reason: str


def dead_letter(raw: bytes | None, key: bytes | None, *, reason: str, detail: str, stage: str,
                max_bytes: int) -> DeadLetter:
    """The record for the dead-letter topic; ``max_bytes`` is the producer's request limit."""
    raw = raw or b""
    key = key[:1024] if key else key
    limit = max(0, max_bytes - HEADROOM)
    value = raw[:limit]
    headers = [
        ("convmon-reason", reason.encode()),
        ("convmon-detail", detail[:MAX_DETAIL].encode("utf-8", "replace")),
        ("convmon-stage", stage.encode()),
        ("convmon-original-bytes", str(len(raw)).encode()),
        ("convmon-truncated", b"1" if len(value) < len(raw) else b"0"),
    ]
    return DeadLetter(key=key, value=value, headers=headers, reason=reason)
