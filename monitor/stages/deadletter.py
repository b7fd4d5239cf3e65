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
    # the conversation (id, or the record key when no id was read): never logged; the log line and
    # `convmon dead-letters` show its keyed reference (monitor/judge/reference.py)
    conversation: str | None = None



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
                      conversation=conversation_id or _text(key))


def _text(key: bytes | None) -> str | None:
    return key.decode("utf-8", "surrogateescape") if key else None


def redacted(letter: DeadLetter, redactor: Redactor, *, max_bytes: int) -> DeadLetter:
    """The letter as the topic may keep it when raw bytes are not allowed (``dead_letter_raw`` off): value
    and detail redacted (ids kept; see ``redact_dead_letter``), still within the request limit."""
    value = redact_dead_letter(letter.value, redactor)[: max(0, max_bytes - HEADROOM)]
    def header(name: str, raw: bytes) -> bytes:
        if name == "convmon-detail":
            return redactor.redact(raw.decode("utf-8", "replace")).encode()
        return b"true" if name == "convmon-redacted" else raw

    return replace(letter, value=value, headers=[(k, header(k, v)) for k, v in letter.headers])
