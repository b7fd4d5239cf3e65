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
"""

from __future__ import annotations


class PartitionClock:
    """Pure: the caller passes wall time (``now``), so tests and the worker drive it alike."""

    def __init__(self) -> None:
        # partition -> (stream time, wall time when consumed, whether that record was the partition's last)
        self._latest: dict[int, tuple[float, float, bool]] = {}

    def observe(self, partition: int, timestamp: float | None, now: float, *, caught_up: bool = True) -> None:
        """A record of ``partition`` was consumed at wall time ``now``; ``timestamp``: its Kafka timestamp in
        seconds (None or 0: unknown, taken as ``now``); ``caught_up``: no later record was in the log. Stream time
        never goes back: an older record (re-keyed, re-delivered, or from a producer with a slow clock) leaves it,
        but still says whether the partition is caught up."""
        stream = min(timestamp, now) if timestamp else now
        previous = self._latest.get(partition)
        if previous is None or stream >= previous[0]:
            self._latest[partition] = (stream, now, caught_up)
        elif caught_up and not previous[2]:
            # the partition's last record is older than one before it (re-keyed records keep their input's
            # timestamps): caught up now, the clock runs on from where it stood
            self._latest[partition] = (previous[0], now, True)
        elif not caught_up:
            self._latest[partition] = (*previous[:2], False)

    def now(self, partition: int, now: float) -> float:
        """The partition's clock at wall time ``now``: its stream time plus the wall time since that record was
        consumed (``now`` itself for a partition that consumed nothing yet); only the stream time while behind."""
        latest = self._latest.get(partition)
        if latest is None:
            return now
        stream, consumed, caught_up = latest
        return stream + max(0.0, now - consumed) if caught_up else stream

    def forget(self, partitions: set[int]) -> None:
        """Partitions revoked: their next owner, or this worker when they come back, starts from their records."""
        for p in partitions:
            self._latest.pop(p, None)
