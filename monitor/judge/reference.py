"""Opaque conversation references: what exemplars and log lines carry instead of a conversation id.

Conversation ids are often e-mail addresses or account numbers, and exemplars end up in Prometheus's
exemplar storage, out of ``convmon forget``'s reach. A reference is a keyed hash (HMAC-SHA256 of the id,
first 80 bits as 20 hex characters): stable across workers that share the key, not reversible without the
key, and resolvable back to the id through the score store, which stores it beside the id
(``convmon forget`` and ``convmon inspect`` accept it). The key is ``pii_reference_key`` when set, else a
random key created once and kept in the label store's database (distill/reference_key.py).

>>> ConversationRef(b"k" * 32)("dave@example.net")
'ref-141ee9a941a43c16cb92'
"""

from __future__ import annotations

import hashlib
import hmac

REF_PREFIX = "ref-"
REF_HEX = 20  # 80 bits: collisions need ~10^12 conversations


class ConversationRef:
    """``ref(conversation_id)`` -> ``ref-<20 hex>``; the same id and key always give the same reference."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a conversation reference key needs at least 16 bytes")
        self._key = key

    def __call__(self, conversation_id: str) -> str:
        digest = hmac.new(self._key, conversation_id.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return REF_PREFIX + digest[:REF_HEX]


def is_reference(value: str) -> bool:
    body = value.removeprefix(REF_PREFIX)
    return value.startswith(REF_PREFIX) and len(body) == REF_HEX and all(c in "0123456789abcdef" for c in body)
