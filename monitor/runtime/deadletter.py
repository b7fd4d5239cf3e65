"""Dead letters: the record (redacted unless ``dead_letter_raw``) plus why and its original size, as Kafka
headers, so nothing is ever lost silently and no PII is kept where it is not allowed."""

from __future__ import annotations

import asyncio
import logging

import faust

from monitor.contracts.metrics import Metrics
from monitor.judge.redact import Redactor, redact_dead_letter

log = logging.getLogger(__name__)
MAX_DETAIL = 2000


def dead_letter_headers(reason: str, detail: str, stage: str, *, size: int | None = None,
                        redacted: bool = False) -> list[tuple[str, bytes]]:
    headers = [
        ("convmon-reason", reason.encode()),
        ("convmon-detail", detail[:MAX_DETAIL].encode("utf-8", "replace")),
        ("convmon-stage", stage.encode()),
    ]
    if size is not None:
        headers.append(("convmon-size", str(size).encode()))  # of the original record, before redaction
        headers.append(("convmon-redacted", b"true" if redacted else b"false"))
    return headers


class DeadLetters:
    def __init__(self, topic: faust.TopicT, metrics: Metrics, *, redactor: Redactor | None = None,
                 keep_raw: bool = False) -> None:
        self.topic = topic
        self.metrics = metrics
        self.redactor = redactor or Redactor()
        self.keep_raw = keep_raw

    async def send(self, raw: bytes | None, key: bytes | None, *, reason: str, detail: str, stage: str) -> None:
        self.metrics.dead_letters.labels(reason).inc()
        # The detail may quote user text: keep it out of INFO logs.
        log.warning("dead letter from %s: %s", stage, reason)
        log.debug("dead letter detail: %s", detail)
        raw = raw or b""
        # off the event loop: redacting a record near the size limit takes a good part of a second
        value = await asyncio.to_thread(redact_dead_letter, raw, self.redactor, keep_raw=self.keep_raw)
        if not self.keep_raw:
            detail = self.redactor.redact(detail[:MAX_DETAIL])
        headers = dead_letter_headers(reason, detail, stage, size=len(raw), redacted=not self.keep_raw)
        await self.topic.send(key=key, value=value, headers=headers)
