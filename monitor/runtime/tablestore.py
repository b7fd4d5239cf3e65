"""A faust table as a :class:`monitor.stages.sessionize.Store`: every write names its changelog partition.

``table[key] = value`` picks the changelog partition from ``current_event()``; inside a
``take_events`` batch (or a timer) that is not the event whose key is written, so recovery would
restore the key to the wrong worker. Here the caller passes the partition of the key's source
event, using the table's public ``data`` (local store) and ``send_changelog``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from faust.types import TableT


class TableStore:
    def __init__(self, table: TableT[Any, Any]) -> None:
        self.table = table

    def get(self, key: str) -> Any:
        return self.table.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        self.table.data[key] = value
        self.table.send_changelog(partition, key, value)

    def delete(self, key: str, partition: int) -> None:
        self.table.data.pop(key, None)
        self.table.send_changelog(partition, key, None, value_serializer="raw")

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.table.data.items())
