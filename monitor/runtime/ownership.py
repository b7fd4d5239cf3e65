"""Which input partitions this worker owns, and when the hot path must rebuild its in-memory indexes.

faust restores tables from their changelogs after every assignment and then sends
``on_rebalance_complete`` (public signal); only then is the table complete, so the rebuild waits
for it. Until the first one the sweep timer does nothing.
"""

from __future__ import annotations

import time
from typing import Protocol

import faust


class Rebuildable(Protocol):
    def assign(self, owned: set[int], now: float) -> None: ...


class Ownership:
    def __init__(self, app: faust.App, topic: str) -> None:
        self.app = app
        self.topic = topic
        self.ready = False
        self.dirty = False
        # faust types a handler as (sender, **kwargs); it calls these with the revoked set positionally
        app.on_partitions_revoked.connect(self._revoked)  # type: ignore[arg-type]
        app.on_rebalance_complete.connect(self._complete)  # type: ignore[arg-type]

    async def _revoked(self, sender: object, *args: object, **kwargs: object) -> None:
        self.ready = False

    async def _complete(self, sender: object, *args: object, **kwargs: object) -> None:
        self.ready = self.dirty = True

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.app.consumer.assignment() if tp.topic == self.topic}

    def refresh(self, hot: Rebuildable) -> float:
        """The current time, after rebuilding ``hot``'s indexes if the assignment changed since the last call."""
        now = time.time()
        if self.dirty:
            self.dirty = False
            hot.assign(self.owned(), now)
        return now
