"""Per-partition stream clocks: the time idle expiry and lateness are measured in.

Processing time is wrong for a partition that is behind: a worker that lags (load, a broker outage)
would close conversations whose next turns are still queued in the log, then dead-letter those turns
as ``late_event``. Record time alone is wrong for a quiet partition: with no new records its last
conversations would never close. So each partition's clock is its latest record timestamp (the
Kafka timestamp, clamped to at most wall time now, so a producer's skewed clock cannot run it ahead)
plus the wall time elapsed since that record was consumed. A caught-up partition reads its records
as they are written: its clock is wall time. A lagging partition reads old records back to back: its
clock follows the log, and a gap between two turns counts as long as it was when they were written.
A partition that has consumed nothing yet reads wall time. While the last record consumed was not
the partition's last (the worker is behind, by its consumer's high watermark), the clock stays at that
record's time: a worker that stalls (a long flush, a broker outage) does not let wall time close
conversations whose next turns wait in the log.

A state partition is read from more than one topic (the input where it is read in place, and the re-keyed
topic, which also carries the writer's sweep ticks: engine/writer.py): each is a *source* with a clock of its
own, as above, and the partition's clock is the earliest of them. A tick, written with wall time, is its
re-keyed partition's last record (caught up) while the input may still be read from a backlog (after a broker
outage, or behind a loaded worker): taken alone it would run the clock to wall time and close, as idle, the
conversations whose next turns wait in the input (then reopened by them, or dead-lettered as late).
"""

from __future__ import annotations

import math

INPUT = "input"  # a source: the input topic, read where it is kept
REKEYED = "rekeyed"  # a source: convmon's re-keyed topic (re-keyed events, rejection markers, sweep ticks)
Latest = tuple[float, float, bool]  # (stream time, wall time when consumed, whether that record was the source's last)


class PartitionClock:
    """Pure: the caller passes wall time (``now``), so tests and the worker drive it alike."""

    def __init__(self) -> None:
        self._latest: dict[int, dict[str, Latest]] = {}  # partition -> source -> its latest record

    def observe(self, partition: int, timestamp: float | None, now: float, *, caught_up: bool = True,
                source: str = INPUT) -> None:
        """A record of ``partition`` was consumed from ``source`` at wall time ``now``; ``timestamp``: its Kafka
        timestamp in seconds (None or 0: unknown, taken as ``now``); ``caught_up``: no later record was in the
        source's log. Stream time never goes back: an older record (re-keyed, re-delivered, or from a producer with
        a slow clock) leaves it, but still says whether the source is caught up."""
        stream = min(timestamp, now) if timestamp else now
        sources = self._latest.setdefault(partition, {})
        previous = sources.get(source)
        if previous is None or stream >= previous[0]:
            sources[source] = (stream, now, caught_up)
        elif caught_up and not previous[2]:
            # the source's last record is older than one before it (re-keyed records keep their input's
            # timestamps): caught up now, the clock runs on from where it stood
            sources[source] = (previous[0], now, True)
        elif not caught_up:
            sources[source] = (*previous[:2], False)

    def now(self, partition: int, now: float) -> float:
        """The partition's clock at wall time ``now``: the earliest of its sources' (``now`` itself for a partition
        that consumed nothing yet)."""
        sources = self._latest.get(partition)
        if not sources:
            return now
        earliest = math.inf
        for stream, consumed, caught_up in sources.values():  # called once per record: a plain loop
            at = stream + max(0.0, now - consumed) if caught_up else stream
            if at < earliest:
                earliest = at
        return earliest

    def forget(self, partitions: set[int]) -> None:
        """Partitions revoked: their next owner, or this worker when they come back, starts from their records."""
        for p in partitions:
            self._latest.pop(p, None)
