"""Per-partition clocks: idle expiry follows the log of a lagging partition and wall time on a quiet one."""

from __future__ import annotations

from monitor.stages.clock import REKEYED, PartitionClock
from monitor.stages.hotpath import Input
from tests.support.hot_path import end, hot_path, turn

T0 = 1_000_000.0  # wall time the records were written; the hot path's idle timeout is 10 s


def test_the_clock_is_the_latest_record_time_plus_wall_time_since_it_was_consumed() -> None:
    clock = PartitionClock()
    assert clock.now(0, T0) == T0  # nothing consumed: wall time
    clock.observe(0, T0 - 100.0, now=T0)  # a record written 100 s ago, read now
    assert clock.now(0, T0) == T0 - 100.0
    assert clock.now(0, T0 + 5.0) == T0 - 95.0
    clock.observe(0, T0 - 200.0, now=T0 + 5.0)  # an older record (re-keyed, re-delivered) does not move it back
    assert clock.now(0, T0 + 5.0) == T0 - 95.0
    clock.observe(0, T0 + 60.0, now=T0 + 6.0)  # a producer clock ahead of ours: clamped to wall time
    assert clock.now(0, T0 + 6.0) == T0 + 6.0
    assert clock.now(1, T0 + 6.0) == T0 + 6.0  # partitions are independent
    clock.forget({0})
    assert clock.now(0, T0 + 7.0) == T0 + 7.0


def test_a_lagging_partition_keeps_a_conversation_whose_record_gap_is_under_the_timeout() -> None:
    """Turns written 8 s apart, read 30 s late and back to back with a sweep between: in processing time the
    conversation looks idle for 30 s; in the partition's time it was idle 8 s, so it stays open and the
    second turn joins it instead of being dead-lettered as late."""
    hot, metrics = hot_path()
    hot.ingest([Input(b"a", turn("a", 0), 0, timestamp=T0)], now=T0 + 30.0)
    assert hot.sweep(T0 + 30.0, {0, 1, 2, 3}).closed == []
    out = hot.ingest([Input(b"a", turn("a", 1), 0, timestamp=T0 + 8.0)], now=T0 + 31.0)
    assert out.dead == [] and out.closed == []
    assert metrics.registry.get_sample_value("convmon_late_events_total", {"kind": "turn"}) in (None, 0.0)
    # then quiet: the clock runs on from the last turn's time with wall time, so the conversation closes once the
    # partition has been idle 10 s in its own time (10 s of wall time after that turn was read)
    assert hot.sweep(T0 + 40.9, {0, 1, 2, 3}).closed == []
    [(conv, partition)] = hot.sweep(T0 + 41.1, {0, 1, 2, 3}).closed
    assert (conv.conversation_id, conv.end_reason, len(conv.turns), partition) == ("a", "idle", 2, 0)


def test_a_quiet_partition_closes_its_conversation_after_the_timeout_in_wall_time() -> None:
    hot, _ = hot_path()
    hot.ingest([Input(b"q", turn("q", 0), 1, timestamp=T0)], now=T0 + 0.2)  # caught up: read as written
    assert hot.sweep(T0 + 9.0, {0, 1, 2, 3}).closed == []
    [(conv, _)] = hot.sweep(T0 + 10.5, {0, 1, 2, 3}).closed
    assert (conv.conversation_id, conv.end_reason) == ("q", "idle")


def test_processing_time_alone_would_have_closed_it() -> None:
    """The same lagging input without record timestamps (processing time): the conversation closes at the sweep
    and its second turn is dead-lettered as late, the symptom the clock removes."""
    hot, _ = hot_path()
    hot.ingest([Input(b"a", turn("a", 0), 0)], now=T0 + 30.0)
    assert len(hot.sweep(T0 + 41.0, {0, 1, 2, 3}).closed) == 1
    out = hot.ingest([Input(b"a", turn("a", 1), 0)], now=T0 + 41.5)
    assert [d.reason for d in out.dead] == ["late_event"]


def test_a_partition_behind_its_log_does_not_advance_with_wall_time() -> None:
    """A worker that stalls while behind (a long flush, a broker outage): its clock waits for the log."""
    clock = PartitionClock()
    clock.observe(0, T0, now=T0 + 1.0, caught_up=False)
    assert clock.now(0, T0 + 60.0) == T0
    clock.observe(0, T0 - 5.0, now=T0 + 61.0, caught_up=True)  # older record, but the partition is now caught up
    clock.observe(0, T0 - 6.0, now=T0 + 61.0, caught_up=False)  # and behind again
    assert clock.now(0, T0 + 90.0) == T0
    clock.observe(0, T0 + 2.0, now=T0 + 91.0)  # caught up: wall time again
    assert clock.now(0, T0 + 95.0) == T0 + 6.0


def test_a_conversation_on_a_stalled_lagging_partition_survives_the_stall() -> None:
    hot, _ = hot_path()
    hot.ingest([Input(b"a", turn("a", 0), 0, timestamp=T0, caught_up=False)], now=T0 + 30.0)
    assert hot.sweep(T0 + 90.0, {0, 1, 2, 3}).closed == []  # a minute without consuming: nothing closes
    out = hot.ingest([Input(b"a", turn("a", 1), 0, timestamp=T0 + 3.0)], now=T0 + 91.0)
    assert out.dead == []
    assert hot.sweep(T0 + 100.0, {0, 1, 2, 3}).closed == []
    assert len(hot.sweep(T0 + 101.5, {0, 1, 2, 3}).closed) == 1


def test_an_older_record_that_is_the_partitions_last_lets_the_clock_run_again() -> None:
    """Re-keyed records keep their input record's timestamp, so a re-keyed partition's timestamps go back and
    forth. A batch read while behind, whose newest record came before an older one that is the partition's last:
    the partition is caught up once that older record is read, and its clock runs with wall time from where it
    stood (it stopped for good before: conversations closed by their grace period or idle timeout stayed open
    until more input came: an intermittent hang)."""
    clock = PartitionClock()
    clock.observe(0, T0 + 2.0, now=T0 + 3.0, caught_up=False)  # behind: a later record is in the log
    clock.observe(0, T0 + 1.0, now=T0 + 3.0, caught_up=True)  # the last record, written before the one above
    assert clock.now(0, T0 + 3.0) == T0 + 2.0  # no jump
    assert clock.now(0, T0 + 63.0) == T0 + 62.0  # then wall time


def test_a_grace_period_closes_a_conversation_whose_last_rekeyed_record_is_older() -> None:
    """The same through the hot path: an end without ``turn_count`` closes once the grace period has passed."""
    hot, _ = hot_path()
    out = hot.ingest([Input(b"a", turn("a", 0), 0, rekeyed=True, timestamp=T0 + 2.0, caught_up=False),
                      Input(b"a", end("a"), 0, rekeyed=True, timestamp=T0 + 1.0, caught_up=True)], now=T0 + 3.0)
    assert out.closed == [] and out.dead == []
    assert hot.sweep(T0 + 3.5, {0, 1, 2, 3}).closed == []  # within the 2 s grace period
    [(conv, _)] = hot.sweep(T0 + 5.5, {0, 1, 2, 3}).closed
    assert (conv.conversation_id, conv.end_reason, len(conv.turns)) == ("a", "end", 1)


def test_a_tick_does_not_run_the_clock_of_a_partition_whose_input_is_behind() -> None:
    """The broker-restart miscount: the writer's sweep tick comes back through the re-keyed topic with a
    wall-clock timestamp, the last record of its re-keyed partition (caught up), while the same state partition's
    input is still read from a backlog. The tick must not run the partition's clock to wall time: it would close a
    conversation whose next turns wait in the input (as idle, then reopened by them as a second revision, or
    dead-lettered as late with reopening off)."""
    hot, _ = hot_path()
    hot.ingest([Input(b"a", turn("a", 0), 0, timestamp=T0, caught_up=False)], now=T0 + 1.0)
    hot.clock.observe(0, T0 + 30.0, T0 + 30.0, caught_up=True, source=REKEYED)  # the tick, 30 s later
    assert hot.clock.now(0, T0 + 30.0) == T0
    assert hot.sweep(T0 + 30.0, {0, 1, 2, 3}).closed == []
    out = hot.ingest([Input(b"a", turn("a", 1), 0, timestamp=T0 + 1.0)], now=T0 + 31.0)  # the input catches up
    assert out.dead == [] and out.closed == []
    assert hot.sweep(T0 + 40.0, {0, 1, 2, 3}).closed == []  # idle 9 s in the partition's time
    [(conv, _)] = hot.sweep(T0 + 41.5, {0, 1, 2, 3}).closed
    assert (conv.end_reason, len(conv.turns)) == ("idle", 2)


def test_the_partition_clock_is_its_slowest_source() -> None:
    """A state partition is read from the input (where it is read in place) and the re-keyed topic: its clock is
    the earlier of theirs, each source's as before (its latest record, and wall time since while caught up)."""
    clock = PartitionClock()
    clock.observe(0, T0, now=T0 + 1.0, caught_up=False)  # the input, behind
    clock.observe(0, T0 + 20.0, now=T0 + 21.0, caught_up=True, source=REKEYED)
    assert clock.now(0, T0 + 30.0) == T0
    clock.observe(0, T0 + 5.0, now=T0 + 31.0, caught_up=True)  # the input caught up: both run with wall time
    assert clock.now(0, T0 + 33.0) == T0 + 7.0
    assert clock.now(0, T0 + 100.0) == T0 + 74.0
    clock.observe(0, T0 + 90.0, now=T0 + 100.0, caught_up=True, source=REKEYED)
    assert clock.now(0, T0 + 100.0) == T0 + 74.0  # the input's own clock is the earlier
    clock.forget({0})
    assert clock.now(0, T0 + 101.0) == T0 + 101.0
