"""Dead letters: what a record that cannot be processed becomes, in one place.

The value is the original bytes, or a prefix of them when they would not fit one produce request
(``max_bytes``): the record itself must never be what crashes the agent. Headers (a public
contract): ``convmon-reason`` (a bounded code), ``convmon-stage``, ``convmon-detail`` (may quote
user text: never logged), ``convmon-field`` (the failing top-level field, when one failed),
``convmon-original-bytes`` (the original size) and
``convmon-truncated`` (``1`` when the value is a prefix) and, when PII redaction applies,
``convmon-redacted``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

from monitor.judge.redact import Redactor, redact_dead_letter

MAX_DETAIL = 2000
HEADROOM = 8192  # key, headers and the record batch's framing, inside the producer's max_request_size


@dataclass(frozen=True)
class DeadLetter:
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    reason: str
    field: str | None = None
    ref: str = "-"  # an opaque reference to the conversation for logs (conversation_ref), never the id


def conversation_ref(conversation_id: str | bytes | None) -> str:
    """A short, stable, opaque reference to a conversation for log lines: the same id gives the same
    reference in every worker's log (grep both), and the id itself never reaches a log.

    Unkeyed (a plain hash): the privacy work's keyed reference (monitor/stages/export.py) should replace it.
    """
    if not conversation_id:
        return "-"
    raw = conversation_id.encode() if isinstance(conversation_id, str) else conversation_id
    return "c:" + hashlib.blake2b(raw, digest_size=6, person=b"convmon-dlref").hexdigest()


def dead_letter(raw: bytes | None, key: bytes | None, *, reason: str, detail: str, stage: str,
                max_bytes: int, field: str | None = None, conversation_id: str | None = None) -> DeadLetter:
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
        ("convmon-redacted", b"false"),
    ]
    if field:
        headers.append(("convmon-field", field[:200].encode("utf-8", "replace")))
    return DeadLetter(key=key, value=value, headers=headers, reason=reason, field=field,
                      ref=conversation_ref(conversation_id or key))


def redacted(letter: DeadLetter, redactor: Redactor, *, max_bytes: int) -> DeadLetter:
    """The letter as the topic may keep it when raw bytes are not allowed (``dead_letter_raw`` off): value
    and detail redacted (ids kept; see ``redact_dead_letter``), still within the request limit."""
    value = redact_dead_letter(letter.value, redactor)[: max(0, max_bytes - HEADROOM)]
    def header(name: str, raw: bytes) -> bytes:
        if name == "convmon-detail":
            return redactor.redact(raw.decode("utf-8", "replace")).encode()
        return b"true" if name == "convmon-redacted" else raw

    return replace(letter, value=value, headers=[(k, header(k, v)) for k, v in letter.headers])
