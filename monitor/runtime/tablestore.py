"""A faust table as a :class:`monitor.stages.sessionize.Store`: every write names its changelog partition.

``table[key] = value`` picks the changelog partition from ``current_event()``; inside a
``take_events`` batch (or a timer) that is not the event whose key is written, so recovery would
restore the key to the wrong worker. Here the caller passes the partition of the key's source
event, using the table's public ``data`` (local store) and ``send_changelog``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from faust.types import TableT

if TYPE_CHECKING:
    from monitor.runtime.delivery import DeliveryGuard


class TableStore:
    def __init__(self, table: TableT[Any, Any], guard: DeliveryGuard | None = None) -> None:
        self.table = table
        self.guard = guard  # every changelog write's delivery is watched (runtime/delivery.py)
        self._held: list[tuple[str, Any, int]] | None = None
        self._acks: list[asyncio.Future[Any]] = []  # put_acked records not yet awaited (wait_acked)

    def hold(self) -> None:
        """Keep changelog writes (not the local data) back until :meth:`release`.

        The hot path holds the sessions' writes until the batch's counts and scores are on the broker:
        a crash in between then restores the sessions as they were before the batch, and the
        re-delivered events close them again (counted once: the dedup marks), instead of meeting
        tombstones of conversations whose counts were lost."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        held, self._held = self._held or [], None
        for key, value, partition in held:
            self._send(key, value, partition)

    def _send(self, key: str, value: Any, partition: int) -> None:
        if self._held is not None:
            self._held.append((key, value, partition))
        elif value is None:
            self._watch(self.table.send_changelog(partition, key, None, value_serializer="raw"))
        else:
            self._watch(self.table.send_changelog(partition, key, value))

    def _watch(self, future: object) -> None:
        if self.guard is not None:
            self.guard.watch(future, f"{self.table.name}-changelog")

    def get(self, key: str) -> Any:
        return self.table.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        self.table.data[key] = value
        self._send(key, value, partition)

    def put_acked(self, key: str, value: Any, partition: int, on_ack: Callable[[], None]) -> None:
        """``put``, calling ``on_ack`` once the broker acknowledged the changelog record (never on failure)."""
        self.table.data[key] = value
        future = self.table.send_changelog(partition, key, value)

        def done(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None:
                on_ack()

        future.add_done_callback(done)
        self._watch(future)
        self._acks.append(future)

    async def wait_acked(self) -> None:
        """Until every ``put_acked`` record so far is acknowledged (or failed: the delivery guard has it).
        faust's ``producer.flush()`` is no barrier for them: its buffer may hand a record to aiokafka after
        the flush returned."""
        acks, self._acks = self._acks, []
        if acks:
            await asyncio.gather(*acks, return_exceptions=True)

    def delete(self, key: str, partition: int) -> None:
        self.table.data.pop(key, None)
        self._send(key, None, partition)

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.table.data.items())
