"""A stream partition's records are delivered in order from its committed offset, or read again.

After every assignment faust resumes the stream partitions and only then seeks them to their committed
offsets (``Recovery.on_recovery_completed`` and ``_resume_streams``, faust-streaming 0.15). The seek is
slow: aiokafka asks for each partition's committed offset in turn, and faust sets its read offsets back
only once all are in. Meanwhile the fetcher delivers a backlog into the agent's queue and moves the read
offsets on, so the first record after the seek looks like a jump: faust records the jump as a *gap* (as
it would the offsets a transactional producer's markers take), and gap offsets count as acknowledged.
Right after the seek ``flow_control.resume()`` clears the agent's queue. The records cleared there were
never processed, yet the gap lets the next commit pass them: 205-420 of 2,000 conversations, consumed
and never scored, in one run of three of the kill -9 fault (the events topic's lag read 0 at the end).

:class:`SeekingConsumer` knows, per stream partition, the offset its next record must have (set by every
seek and by every record delivered). A record past it is not delivered: the partition is sought back
there and read again, so the records cleared with the queue come back (as duplicates where they were
processed before). Only the same jump seen again from the same offset (a transactional producer's
markers are where records never are) goes on to faust as a gap. Every gap is logged and counted, every rewind too
(``convmon_consumer_rewinds_total{topic}``).

Records fetched and then dropped unprocessed must be read again: the hot path's batches report every drop
(:meth:`SeekingConsumer.read_again`), and when the flow resumes after a rebalance, which clears faust's queues,
every stream partition goes back to where the assignment's seek put it and is sought there again. A partition
with nothing committed is sought to its log start: aiokafka seeks only committed offsets above 0, so at a first
assignment (flow active, the fetcher already running for the table restore) the records cleared on resume were
never read again, and faust, which checks the head of its acknowledged offsets only against a committed offset,
committed over them (350 and 600 of 2,000 ids in CI's kill -9 runs). Seeks run on the consumer's thread.

A gap's offsets are counted by what they held. Offsets that the re-read from the same offset showed
to hold no record, inside the partition's log, are *empty* (``convmon_consumer_empty_offsets_total``): a
transactional producer's markers, or offsets a restarted or restored log has no record at (after a kill -9
during produce, Tansu's S3 engine came back with its high watermark behind the batches it had stored, and
its offsets were then no longer contiguous). The consumer skipped nothing there, so
they page no one; whether the broker kept every acknowledged record is for the producer to check. Offsets
below the partition's log start when read (records deleted or lost before this consumer read them), and
any gap faust records without that re-read, are *skipped* (``convmon_consumer_gap_offsets_total``): input
committed without being processed, which ``ConvmonInputSkipped`` pages. faust's own gap range ends at the
record delivered after it; that record is not counted.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from aiokafka.errors import IllegalStateError
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, AppT, Message

log = logging.getLogger(__name__)
OffsetsHandler = Callable[[str, int], None]  # (topic, offsets)
_ON_GAP: weakref.WeakKeyDictionary[AppT, OffsetsHandler] = weakref.WeakKeyDictionary()
_ON_REWIND: weakref.WeakKeyDictionary[AppT, OffsetsHandler] = weakref.WeakKeyDictionary()
_ON_EMPTY: weakref.WeakKeyDictionary[AppT, OffsetsHandler] = weakref.WeakKeyDictionary()


def on_gap(app: AppT, gap: OffsetsHandler, rewind: OffsetsHandler | None = None,
           empty: OffsetsHandler | None = None) -> None:
    """Call ``gap`` with the skipped offsets of every gap ``app``'s consumer records, ``empty`` with its
    empty ones and ``rewind`` for every jump it reads again (metrics, in the worker), each with the topic
    and the number of offsets."""
    _ON_GAP[app] = gap
    if rewind is not None:
        _ON_REWIND[app] = rewind
    if empty is not None:
        _ON_EMPTY[app] = empty


class SeekingConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer that reads a jump in a stream partition again instead of committing over it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next: dict[TP, int] = {}  # stream partition -> the offset its next record must have
        self._rewound_at: dict[TP, int] = {}  # where the last rewind went: the same jump from there is a gap
        self._jumped: dict[TP, tuple[int, int]] = {}  # (from, to) of the last jump a re-read confirmed
        self._started_at: dict[TP, int] = {}  # where the last assignment's seek put each stream partition
        self._on_resume = _ReadAgainOnResume(self)  # flow control holds it weakly
        self.app.flow_control.manage_queue(self._on_resume)  # type: ignore[arg-type]  # it asks only for clear()

    async def perform_seek(self) -> None:
        """Every stream partition to its committed offset, and one with nothing committed to its log start:
        aiokafka seeks only committed offsets above 0, so records fetched before the seek and cleared with
        faust's queues would otherwise never be read again, and the next commit would pass them."""
        await super().perform_seek()
        # before any await: the fetch loop moves the read offsets on as soon as it runs
        committed = {tp: self._read_offset.get(tp) for tp in self.assignment() if not self._is_changelog_tp(tp)}
        self._started_at = {tp: offset for tp, offset in committed.items() if offset}
        for tp, offset in committed.items():
            self._expect(tp, offset or None)
        fresh = [tp for tp, offset in committed.items() if not offset]
        starts = {TP(tp.topic, tp.partition): offset
                  for tp, offset in (await self.log_starts(*fresh) if fresh else {}).items()}
        for tp in fresh:
            start = starts.get(TP(tp.topic, tp.partition))
            if start is not None:  # unknown: the first record read sets where the partition goes on
                self._started_at[tp] = start
                await self.seek(tp, min(start, self._next.get(tp, start)))

    def read_again(self, tp: TP, offset: int) -> None:
        """Records of ``tp`` from ``offset`` on were fetched and dropped unprocessed: its next record must be
        ``offset``, so a later one is read again from there (faust's read offset goes back with it)."""
        expected = self._next.get(tp)
        if expected is None or offset < expected:
            self._expect(tp, offset)
        read = self._read_offset.get(tp)
        if read is not None and offset <= read:
            self._read_offset[tp] = offset or None

    def read_again_from_start(self) -> None:
        """After a rebalance faust clears its queues (``flow_control.resume()``), which may hold records read
        after the seek: every stream partition goes back to where the assignment's seek put it."""
        if not self._started_at:
            return  # no assignment sought yet
        assigned = self.assignment()
        starts = {tp: offset for tp, offset in self._started_at.items() if tp in assigned}
        for tp, offset in starts.items():
            self.read_again(tp, offset)
        if starts:  # read them now, not only once a later record shows the jump
            self._seeking_again = asyncio.ensure_future(self._seek_again(list(starts),
                                                                         self.app.consumer_generation_id))

    async def _seek_again(self, partitions: list[TP], generation_id: int) -> None:
        for tp in partitions:
            if self.app.consumer_generation_id != generation_id or self.should_stop:
                return  # a rebalance since: its own seek reads from the commits
            start = self._started_at.get(tp)
            if start is None:
                continue
            offset = min(start, self._next.get(tp, start))  # a drop reported since may have set it lower
            try:
                await self.seek(tp, offset)
            except IllegalStateError:  # revoked meanwhile
                return
            except Exception:  # noqa: BLE001 - the next record past ``offset`` still reads it again
                log.warning("could not seek %s[%d] back to %d", tp.topic, tp.partition, offset, exc_info=True)

    async def _seek(self, partition: TP, offset: int) -> None:
        """On the consumer's thread: faust calls aiokafka's ``seek`` from the app's thread, where it races the
        fetcher (a ``KeyError`` in ``fetched_records`` stopped a worker in 1 of 8 kill -9 runs)."""
        thread: Any = self._thread
        await thread.call_thread(thread.seek, partition, offset)

    async def seek(self, partition: TP, offset: int) -> None:
        await super().seek(partition, offset)
        self._expect(partition, offset)

    def _expect(self, tp: TP, offset: int | None) -> None:
        self._rewound_at.pop(tp, None)
        if offset is None:
            self._next.pop(tp, None)  # nothing committed: the first record read sets it
        else:
            self._next[tp] = offset

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Message]]:
        rewound: set[TP] = set()
        async for tp, message in super().getmany(timeout):
            if tp in rewound:
                continue  # fetched before the rewind
            expected, offset = self._next.get(tp), message.offset
            if (expected is not None and offset > expected and self._rewound_at.get(tp) != expected
                    and self.app.topics.acks_enabled_for(tp.topic)):
                rewound.add(tp)
                await self._rewind(tp, expected, offset)
                continue
            if expected is not None and offset > expected and self._rewound_at.get(tp) == expected:
                self._jumped[tp] = (expected, offset)  # the re-read from ``expected`` jumped again
            if expected is None or offset >= expected:
                self._next[tp] = offset + 1
            yield tp, message

    async def _rewind(self, tp: TP, expected: int, offset: int) -> None:
        log.warning("%s[%d] jumped from offset %d to %d: reading it again from %d", tp.topic, tp.partition,
                    expected, offset, expected)
        handler = _ON_REWIND.get(self.app)
        if handler is not None:
            handler(tp.topic, offset - expected)
        await self.seek(tp, expected)
        self._rewound_at[tp] = expected

    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        skipped, empty = await self._gap_offsets(tp, offset_from, offset_to)
        if skipped:  # the fault suite counts this line (tests/reliability/fault_run.py GAP_WARNING)
            log.warning("offsets %d-%d of %s[%d] will be committed without a record (faust took them for a gap): "
                        "%d skipped (records never processed), %d empty (no record there when read again)",
                        offset_from, offset_to - 1, tp.topic, tp.partition, skipped, empty)
        else:
            log.warning("offsets %d-%d of %s[%d] held no record when read again (transaction markers, or a "
                        "restarted log's hole): %d empty offsets committed over, nothing skipped",
                        offset_from, offset_to - 1, tp.topic, tp.partition, empty)
        for handlers, offsets in ((_ON_GAP, skipped), (_ON_EMPTY, empty)):
            handler = handlers.get(self.app)
            if handler is not None and offsets > 0:
                handler(tp.topic, offsets)
        await super()._add_gap(tp, offset_from, offset_to)

    async def _gap_offsets(self, tp: TP, offset_from: int, offset_to: int) -> tuple[int, int]:
        """(skipped, empty) offsets before the record at ``offset_to``; faust's range includes that record."""
        jumped = self._jumped.pop(tp, None)
        if jumped is None or jumped[1] != offset_to:
            return max(0, offset_to - offset_from), 0  # not read again: nothing shows the offsets were empty
        start = jumped[0]
        try:
            starts = {(k.topic, k.partition): v for k, v in (await self.log_starts(tp)).items()}
            log_start = starts[(tp.topic, tp.partition)]
        except Exception:  # noqa: BLE001 - unknown log start: page rather than hide a loss
            log.warning("log start of %s[%d] unknown: counting its gap as skipped", tp.topic, tp.partition,
                        exc_info=True)
            return offset_to - start, 0
        skipped = max(0, min(log_start, offset_to) - start)  # deleted or lost before they were read
        return skipped, offset_to - start - skipped

    async def log_starts(self, *partitions: TP) -> Mapping[TP, int]:
        """The partitions' first offsets (the log start) on the broker."""
        return await self.earliest_offsets(*partitions)


class _ReadAgainOnResume:
    """Managed by faust's flow control like a queue: cleared on every revocation (flow suspended: the next
    assignment seeks anyway) and when the flow resumes after a rebalance (then the consumer reads again)."""

    def __init__(self, consumer: SeekingConsumer) -> None:
        self.consumer = consumer

    def clear(self) -> None:
        if self.consumer.app.flow_control.is_active():
            self.consumer.read_again_from_start()
