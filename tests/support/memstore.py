"""A dict as the sessionizer's store, writing every change through faust's JSON codec like a changelog."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from faust.utils import json as faust_json


class MemStore:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.changelog_bytes = 0
        self.writes: list[tuple[str, int]] = []  # (key, partition) of every changelog record

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        encoded = faust_json.dumps(value)
        self.changelog_bytes += len(faust_json.dumps(key)) + len(encoded)
        self.data[key] = faust_json.loads(encoded)
        self.writes.append((key, partition))

    def delete(self, key: str, partition: int) -> None:
        self.changelog_bytes += len(faust_json.dumps(key))
        self.data.pop(key, None)
        self.writes.append((key, partition))

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.data.items())

    def restarted(self) -> MemStore:
        """The store a restarted worker recovers: the same data, through the codec."""
        fresh = MemStore()
        fresh.data = {k: faust_json.loads(faust_json.dumps(v)) for k, v in self.data.items()}
        return fresh
