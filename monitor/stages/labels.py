"""The label sink's write path: buffer, retry, and push back instead of dropping.

When the label store is down, records wait in memory and are retried on every call and by a
background task with backoff, so they are written once the store is back even if no new label
arrives. Past ``max_buffer`` the writer blocks (retrying with backoff) so the agent stops
consuming and Kafka keeps the records: nothing is lost while the process lives, and
``convmon_label_store_buffered`` says how far behind. (Buffered records are already acknowledged
to Kafka: a crash during an outage loses up to ``max_buffer`` labels; see docs/reliability.md.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from monitor.contracts.errors import StoreError
from monitor.contracts.metrics import Metrics

log = logging.getLogger(__name__)


class BufferedLabelWriter:
    def __init__(
        self,
        upsert: Callable[[list[dict[str, Any]]], None],
        metrics: Metrics,
        *,
        max_buffer: int = 10_000,
        max_backoff_s: float = 30.0,
    ) -> None:
        self.upsert = upsert
        self.metrics = metrics
        self.max_buffer = max_buffer
        self.max_backoff_s = max_backoff_s
        self._buffer: list[dict[str, Any]] = []
        self._lock = asyncio.Lock()  # one flush at a time: a flush deletes the prefix it wrote
        self._retry: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        return len(self._buffer)

    async def write(self, records: list[dict[str, Any]]) -> None:
        self._buffer.extend(records)
        backoff = 0.5
        while self._buffer and not await self._flush():
            if len(self._buffer) <= self.max_buffer:
                self._retry_later()
                return  # keep buffering; the next batch or the retry task writes it
            await asyncio.sleep(backoff)  # full: hold the stream until the store is back
            backoff = min(backoff * 2, self.max_backoff_s)

    def _retry_later(self) -> None:
        if self._retry is None or self._retry.done():
            self._retry = asyncio.get_running_loop().create_task(self._retry_until_empty())

    async def _retry_until_empty(self) -> None:
        backoff = 0.5
        while self._buffer:
            await asyncio.sleep(backoff)
            if not await self._flush():
                backoff = min(backoff * 2, self.max_backoff_s)

    async def _flush(self) -> bool:
        async with self._lock:
            return await self._flush_locked()

    async def _flush_locked(self) -> bool:
        batch = list(self._buffer)
        if not batch:
            return True
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.upsert, batch)
        except StoreError as exc:
            self.metrics.label_store_errors.inc()
            self.metrics.label_store_buffered.set(len(self._buffer))
            log.warning("label store write failed, %d records buffered: %s", len(self._buffer), exc)
            return False
        del self._buffer[: len(batch)]
        self.metrics.label_store_buffered.set(len(self._buffer))
        return True
