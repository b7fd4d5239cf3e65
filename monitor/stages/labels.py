"""The label sink's write path: store a batch before its offsets are acknowledged, isolate bad rows.

The sink hands each batch from the labels topic to :meth:`LabelSink.store`, which returns only
once every row is in the database or rejected, and the agent acknowledges the batch to Kafka
after that. While the store is down ``store`` keeps retrying with backoff (counting
``convmon_label_store_errors_total``, and ``convmon_label_store_buffered`` says how many labels
wait), so the sink stops consuming and Kafka keeps the records: a crash during an outage loses
nothing, the next owner of the partition re-reads them. A row the database refuses for its data
(:class:`LabelRejected`) is found by bisection and returned as a :class:`Rejected` for the
dead-letter topic, so it cannot block the rows around it.

One conversation's records reach the stores several times (its label, and with ``score_store`` its
distilled and judge score records): a conversation the database refuses (a NUL in its id) is
dead-lettered once per reason, not once per record. :class:`RejectedOnce`, shared by the label and
score sinks, remembers the last ``max_keys`` (conversation, reason) pairs of this worker; repeats are
counted in ``convmon_label_store_rejected_repeats_total`` (each record stays on its own topic).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from monitor.contracts.errors import LabelRejected, StoreError
from monitor.contracts.metrics import Metrics

log = logging.getLogger(__name__)
Upsert = Callable[[list[dict[str, Any]]], Any]


def both(first: Upsert, second: Upsert) -> Upsert:
    """One sink write into two tables, in order (each upsert is idempotent: a retried batch rewrites both)."""
    def write(items: list[dict[str, Any]]) -> Any:
        written = first(items)
        second(items)
        return written
    return write


@dataclass(frozen=True)
class Rejected:
    """A labels-topic message that will never be stored, for the dead-letter topic."""

    key: bytes | None
    raw: bytes
    reason: str  # label_invalid (not JSON) | label_rejected (the database or the label schema refused it)
    detail: str


@dataclass(frozen=True)
class _Row:
    key: bytes | None
    raw: bytes
    value: dict[str, Any]


def one_line(exc: BaseException) -> str:
    """A driver's multi-line error (psycopg adds hints on new lines) as one log line an operator can grep."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())


class RejectedOnce:
    """The (conversation key, reason) pairs dead-lettered lately, least recent first; bounded."""

    def __init__(self, max_keys: int = 10_000) -> None:
        self.max_keys = max_keys
        self._seen: OrderedDict[tuple[bytes, str], None] = OrderedDict()

    def first(self, key: bytes | None, reason: str) -> bool:
        """True the first time (and for a record without a key); False for a repeat."""
        if key is None:
            return True
        pair = (key, reason)
        if pair in self._seen:
            self._seen.move_to_end(pair)
            return False
        self._seen[pair] = None
        if len(self._seen) > self.max_keys:
            self._seen.popitem(last=False)
        return True


class LabelSink:
    def __init__(
        self,
        upsert: Upsert,
        metrics: Metrics,
        *,
        initial_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        once: RejectedOnce | None = None,
    ) -> None:
        self.upsert = upsert
        self.metrics = metrics
        self.once = once or RejectedOnce()
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep

    async def store(self, messages: list[tuple[bytes | None, bytes]]) -> list[Rejected]:
        """Store every storable message (retrying through outages); return the ones to dead-letter."""
        rows: list[_Row] = []
        rejected: list[Rejected] = []
        for key, raw in messages:
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                rejected.append(Rejected(key, raw, "label_invalid", f"not JSON: {exc}"))
                continue
            if not isinstance(value, dict):
                rejected.append(Rejected(key, raw, "label_invalid", "not a JSON object"))
                continue
            rows.append(_Row(key, raw, value))
        backoff = self.initial_backoff_s
        while rows:
            try:
                rejected += await self._write(rows)
                break
            except StoreError as exc:  # an outage (or anything but a data refusal): keep the batch, retry
                self.metrics.label_store_errors.inc()
                self.metrics.label_store_buffered.set(len(rows))
                log.warning("label store write failed, %d labels wait (not acknowledged to Kafka), retry in "
                            "%.1fs: %s", len(rows), backoff, one_line(exc))
                await self._sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
        self.metrics.label_store_buffered.set(0)
        return self._once_each(rejected)

    def _once_each(self, rejected: list[Rejected]) -> list[Rejected]:
        """The rejections to dead-letter: the first of each (conversation, reason); repeats only counted."""
        letters = []
        for bad in rejected:
            if self.once.first(bad.key, bad.reason):
                letters.append(bad)
            else:
                self.metrics.rejected_repeats.labels(bad.reason).inc()
        return letters

    async def _write(self, rows: list[_Row]) -> list[Rejected]:
        """Write ``rows``; on a data refusal, halve until the refused rows stand alone."""
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.upsert, [r.value for r in rows])
            return []
        except LabelRejected as exc:
            if len(rows) == 1:
                return [Rejected(rows[0].key, rows[0].raw, "label_rejected", str(exc))]
        except StoreError:
            raise
        except Exception as exc:  # database drivers raise their own trees: treat as an outage, retry
            raise StoreError(f"label store write failed: {type(exc).__name__}") from exc
        middle = len(rows) // 2
        return await self._write(rows[:middle]) + await self._write(rows[middle:])
