"""Dead letters: the original bytes plus why, as Kafka headers, so nothing is ever lost silently."""

from __future__ import annotations

import logging

import faust

from monitor.contracts.metrics import Metrics

log = logging.getLogger(__name__)
MAX_DETAIL = 2000


def dead_letter_headers(reason: str, detail: str, stage: str) -> list[tuple[str, bytes]]:
    return [
        ("convmon-reason", reason.encode()),
        ("convmon-detail", detail[:MAX_DETAIL].encode("utf-8", "replace")),
        ("convmon-stage", stage.encode()),
    ]


class DeadLetters:
    def __init__(self, topic: faust.TopicT, metrics: Metrics) -> None:
        self.topic = topic
        self.metrics = metrics

    async def send(self, raw: bytes | None, key: bytes | None, *, reason: str, detail: str, stage: str) -> None:
        self.metrics.dead_letters.labels(reason).inc()
        # The detail may quote user text: keep it out of INFO logs.
        log.warning("dead letter from %s: %s", stage, reason)
        log.debug("dead letter detail: %s", detail)
        await self.topic.send(key=key, value=raw or b"", headers=dead_letter_headers(reason, detail, stage))
