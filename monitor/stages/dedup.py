"""The dedup window: which (scorer, conversation) pairs were already counted, bounded in time and size.

Guarantee: a key is reported new at most once while its mark is younger than ``window_s`` *and*
among the newest ``max_keys`` marks of its partition; older marks are forgotten (and deleted from
the store, so the changelog and memory stay bounded: at most ``max_keys`` marks per owned
partition). A re-delivery older than both bounds would be counted again; with the defaults (2 days,
200,000 conversations per partition) that is far beyond Kafka's re-delivery after a crash.
Store values are ``[time counted, partition]``, logged and committed with the batch that counted
(engine/checkpoint.py), so a restored mark always belongs to a count that is in the restored totals.
"""

from __future__ import annotations

from collections import OrderedDict

from monitor.stages.sessionize import Store


class DedupWindow:
    def __init__(self, store: Store, *, window_s: float, max_keys: int) -> None:
        self.store = store
        self.window_s = window_s
        self.max_keys = max_keys
        self._marks: dict[int, OrderedDict[str, float]] = {}

    def first(self, key: str, partition: int, now: float) -> bool:
        """True (and mark it) if ``key`` was not counted yet in this window; False for a duplicate."""
        marks = self._marks.setdefault(partition, OrderedDict())
        if key in marks:
            return False
        marks[key] = now
        self.store.put(key, [now, partition], partition)
        while marks and (len(marks) > self.max_keys or now - next(iter(marks.values())) > self.window_s):
            old, _ = marks.popitem(last=False)
            self.store.delete(old, partition)
        return True

    def size(self, partition: int) -> int:
        return len(self._marks.get(partition, ()))

    def rebuild(self, owned: set[int]) -> None:
        """The window from the store after a restart or rebalance, oldest first. A mark of the releases that
        numbered batches has a third field, the batch's sequence: replay keeps only committed marks, so it is
        ignored."""
        entries = []
        for key, v in list(self.store.items()):
            if isinstance(v, list) and len(v) in (2, 3) and v[1] in owned and ":" in key:
                entries.append((float(v[0]), int(v[1]), key))
        self._marks = {}
        for t, partition, key in sorted(entries):
            self._marks.setdefault(partition, OrderedDict())[key] = t
