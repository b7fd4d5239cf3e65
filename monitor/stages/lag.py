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


def partition_progress(owned: Iterable[tuple[str, int]], topics: Iterable[str], *,
                       highwater: Mapping[tuple[str, int], int | None],
                       processed: Mapping[tuple[str, int], int | None]) -> dict[tuple[str, int], tuple[int, int]]:
    """(lag, next offset) per owned partition that has processed something: a partition with no read
    position yet has nothing to judge a stall by (the stalled-partition alert reads these)."""
    wanted = set(topics)
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for tp in owned:
        high, last = highwater.get(tp), processed.get(tp)
        if tp[0] in wanted and high is not None and last is not None:
            out[tp] = (max(0, high - (last + 1)), last + 1)
    return out
