"""Sending dead letters (built by ``monitor.stages.deadletter``): counted, logged without their detail, and
redacted unless ``dead_letter_raw`` allows the original bytes. The checkpoint sends them and checks their
delivery (runtime/checkpoint.py)."""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any, Protocol

from monitor.contracts.metrics import Metrics
from monitor.judge.redact import Redactor
from monitor.judge.reference import ConversationRef
from monitor.stages.deadletter import DeadLetter, dead_letter, redacted

log = logging.getLogger(__name__)


class Sender(Protocol):
    """A topic to send to: faust's, or the checkpoint engine's (engine/checkpoint.py ``TopicSender``)."""

    async def send(self, *, key: bytes | None, value: bytes | None, headers: Any) -> Any: ...


class DeadLetters:
    def __init__(self, topic: Sender, metrics: Metrics, *, max_bytes: int = 1_048_576,
                 redactor: Redactor | None = None, keep_raw: bool = False,
                 reference: ConversationRef | None = None) -> None:
        self.topic = topic
        # the worker's keyed reference (the exemplars' one); tests without a store: a random key, still opaque
        self.reference = reference or ConversationRef(secrets.token_bytes(32))
        self.metrics = metrics
        self.max_bytes = max_bytes
        self.redactor = redactor or Redactor()
        self.keep_raw = keep_raw

    async def send(self, raw: bytes | None, key: bytes | None, *, reason: str, detail: str, stage: str,
                   field: str | None = None) -> Any:
        return await self.send_letter(dead_letter(raw, key, reason=reason, detail=detail, stage=stage,
                                                  max_bytes=self.max_bytes, field=field))

    async def send_letter(self, letter: DeadLetter) -> Any:
        """The record's delivery future (faust's ``FutureMessage``)."""
        self.metrics.dead_letters.labels(letter.reason).inc()
        # The detail may quote user text: never logged. The reference is keyed and opaque (judge/reference.py);
        # `convmon dead-letters tail` prints the detail from the topic.
        stage = dict(letter.headers).get("convmon-stage", b"").decode("utf-8", "replace")
        log.warning("dead letter: %s (field %s, conversation %s, stage %s)", letter.reason, letter.field or "-",
                    self.reference(letter.conversation) if letter.conversation else "-", stage or "-")
        if not self.keep_raw:  # off the event loop: a record near the size limit takes a good part of a second
            letter = await asyncio.to_thread(redacted, letter, self.redactor, max_bytes=self.max_bytes)
        return await self.topic.send(key=letter.key, value=letter.value, headers=letter.headers)
