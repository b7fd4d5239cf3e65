"""A faust table as a :class:`monitor.stages.sessionize.Store`: every write names its changelog partition.

``table[key] = value`` picks the changelog partition from ``current_event()``; inside a
``take_events`` batch (or a timer) that is not the event whose key is written, so recovery would
restore the key to the wrong worker. Here the caller passes the partition of the key's source
event, using the table's public ``data`` (local store) and ``send_changelog``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import faust


class TableStore:
    def __init__(self, table: faust.Table) -> None:
        self.table = table

    def get(self, key: str) -> Any:
        return self.table.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        self.table.data[key] = value
        self.table.send_changelog(partition, key, value)

    def put_acked(self, key: str, value: Any, partition: int, on_ack: Callable[[], None]) -> None:
        """``put``, calling ``on_ack`` once the broker acknowledged the changelog record (never on failure)."""
        self.table.data[key] = value
        future = self.table.send_changelog(partition, key, value)

        def done(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None:
                on_ack()

        future.add_done_callback(done)

    def delete(self, key: str, partition: int) -> None:
        self.table.data.pop(key, None)
        self.table.send_changelog(partition, key, None, value_serializer="raw")

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.table.data.items())
