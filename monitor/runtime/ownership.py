"""Which input partitions this worker owns, and when the hot path must rebuild its in-memory indexes.

faust restores tables from their changelogs after every assignment and then sends
``on_rebalance_complete`` (public signal); only then is the table complete, so the rebuild waits
for it. Until the first one the sweep timer does nothing.

The restore time (``convmon_state_restore_seconds``) is measured from the assignment
(``on_partitions_assigned``) to ``on_rebalance_complete``, plus the rebuild itself: not the wait between
the two, as the rebuild runs at the next batch or sweep.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

import faust


class Rebuildable(Protocol):
    def assign(self, owned: set[int], now: float) -> None: ...
    def revoke(self, partitions: set[int]) -> None: ...
    def restored(self, seconds: float) -> None: ...


class Ownership:
    def __init__(self, app: faust.App, topic: str, hot: Rebuildable | None = None,
                 lock: asyncio.Lock | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.topic = topic
        self.hot = hot  # told at once which partitions were revoked (their totals stop being exported)
        # the hot path's lock: a revocation waits for the batch in progress (its counts, scores and session
        # writes) to finish, so no batch straddles a rebalance
        self.lock = lock or asyncio.Lock()
        self.ready = False
        self.dirty = False
        self.clock = clock
        self._assigned_at: float | None = None  # the assignment whose tables faust is restoring
        self._recovered_s: float | None = None  # how long faust took to restore them
        # faust types a handler as (sender, **kwargs); it calls these with the revoked set positionally
        app.on_partitions_revoked.connect(self._revoked)  # type: ignore[arg-type]
        app.on_rebalance_complete.connect(self._complete)  # type: ignore[arg-type]
        app.on_partitions_assigned.connect(self._assigned)  # type: ignore[arg-type]

    async def _assigned(self, sender: object, *args: object, **kwargs: object) -> None:
        if self._assigned_at is None:  # a second assignment before recovery completed: from the first
            self._assigned_at = self.clock()

    async def _revoked(self, sender: object, revoked: object = (), *args: object, **kwargs: object) -> None:
        async with self.lock:
            self.ready = False
            if self.hot is not None and isinstance(revoked, set | frozenset | list | tuple):
                self.hot.revoke({tp.partition for tp in revoked if getattr(tp, "topic", None) == self.topic})

    async def _complete(self, sender: object, *args: object, **kwargs: object) -> None:
        self.ready = self.dirty = True
        if self._assigned_at is not None:
            self._recovered_s, self._assigned_at = self.clock() - self._assigned_at, None

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.app.consumer.assignment() if tp.topic == self.topic}

    def refresh(self, hot: Rebuildable) -> float:
        """The current time, after rebuilding ``hot``'s indexes if the assignment changed since the last call."""
        now = time.time()
        if self.dirty:
            self.dirty = False
            started = self.clock()
            hot.assign(self.owned(), now)
            if self._recovered_s is not None:
                hot.restored(self._recovered_s + self.clock() - started)
                self._recovered_s = None
        return now
