"""Which input partitions this worker owns, and when the hot path must rebuild its in-memory indexes.

faust restores tables from their changelogs after every assignment and then sends
``on_rebalance_complete`` (public signal); only then is the table complete, so the rebuild waits
for it. Until the first one the sweep timer does nothing.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

import faust


class Rebuildable(Protocol):
    def assign(self, owned: set[int], now: float) -> None: ...
    def revoke(self, partitions: set[int]) -> None: ...


class Ownership:
    def __init__(self, app: faust.App, topic: str, hot: Rebuildable | None = None,
                 lock: asyncio.Lock | None = None) -> None:
        self.app = app
        self.topic = topic
        self.hot = hot  # told at once which partitions were revoked (their totals stop being exported)
        # the hot path's lock: a revocation waits for the batch in progress (its counts, scores and session
        # writes) to finish, so no batch straddles a rebalance
        self.lock = lock or asyncio.Lock()
        self.ready = False
        self.dirty = False
        # faust types a handler as (sender, **kwargs); it calls these with the revoked set positionally
        app.on_partitions_revoked.connect(self._revoked)  # type: ignore[arg-type]
        app.on_rebalance_complete.connect(self._complete)  # type: ignore[arg-type]

    async def _revoked(self, sender: object, revoked: object = (), *args: object, **kwargs: object) -> None:
        async with self.lock:
            self.ready = False
            if self.hot is not None and isinstance(revoked, set | frozenset | list | tuple):
                self.hot.revoke({tp.partition for tp in revoked if getattr(tp, "topic", None) == self.topic})

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
