"""Workarounds for the embedded development broker (Tansu), loaded only when the cluster is Tansu.

A memory-only Tansu restarted has lost every topic; Kafka never does. Without its topics back a worker's
offsets never commit again, so against Tansu the worker checks them every ``TOPIC_CHECK_INTERVAL_S`` and
recreates the missing ones with convmon's specs (as `convmon topics create`). Tansu's other differences are
handled where they matter: restores read to a fence record, not to a ListOffsets answer (monitor/engine/changelog.py),
and the upgrade reads to the high watermark a fetch reports (monitor/engine/upgrade.py).
"""

from __future__ import annotations

import asyncio
import logging

from monitor.contracts.settings import KafkaSettings
from monitor.runtime.topics import create_topics

log = logging.getLogger(__name__)
TOPIC_CHECK_INTERVAL_S = 5.0


async def keep_topics(kafka: KafkaSettings, interval_s: float = TOPIC_CHECK_INTERVAL_S) -> None:
    """Recreate topics a restarted memory-only broker lost, until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            created = await create_topics(kafka)
        except Exception as exc:  # the broker is still down: try again at the next tick
            log.warning("topic check failed: %s", type(exc).__name__)
            continue
        if created:
            log.warning("the development broker had lost topics %s: recreated", ", ".join(created))
