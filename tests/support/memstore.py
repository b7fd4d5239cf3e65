"""A dict as the sessionizer's store, writing every change through orjson (the changelog codec)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson


class MemStore:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.changelog_bytes = 0
        self.writes: list[tuple[str, int]] = []  # (key, partition) of every changelog record

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        encoded = orjson.dumps(value)
        self.changelog_bytes += len(orjson.dumps(key)) + len(encoded)
        self.data[key] = orjson.loads(encoded)
        self.writes.append((key, partition))

    def delete(self, key: str, partition: int) -> None:
        self.changelog_bytes += len(orjson.dumps(key))
        self.data.pop(key, None)
        self.writes.append((key, partition))

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.data.items())

    def restarted(self) -> MemStore:
        """The store a restarted worker recovers: the same data, through the codec."""
        fresh = MemStore()
        fresh.data = {k: orjson.loads(orjson.dumps(v)) for k, v in self.data.items()}
        return fresh
