"""Consumer lag per topic from the partitions a worker owns: the log end minus the next offset to process.

Each worker reports its own partitions, so ``sum by (topic)`` is the group's lag; a topic whose
partitions were all revoked reports 0 (or its old value would linger).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def lag_by_topic(owned: Iterable[tuple[str, int]], topics: Iterable[str], *,
                 highwater: Mapping[tuple[str, int], int | None],
                 processed: Mapping[tuple[str, int], int | None]) -> dict[str, int]:
    """``processed[tp]`` is the offset of the last record processed (None: nothing yet)."""
    lags = dict.fromkeys(topics, 0)
    for tp in owned:
        high = highwater.get(tp)
        if tp[0] in lags and high is not None:
            last = processed.get(tp)
            lags[tp[0]] += max(0, high - (last + 1 if last is not None else 0))
    return lags
