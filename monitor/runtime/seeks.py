"""A stream partition's records are delivered in order from its committed offset, or read again (#18).

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
markers are where records never are) goes on to faust as a gap. Pausing the partitions for the length
of the seek instead was tried and dropped: a kill -9 test on turn events then lost conversations in 3 of
10 runs (not understood). Every gap is counted (``convmon_consumer_gap_offsets_total{topic}``) and
logged, every rewind too (``convmon_consumer_rewinds_total{topic}``): on a topic without transactional
producers a gap means records committed without being processed.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, AppT, Message

log = logging.getLogger(__name__)
OffsetsHandler = Callable[[str, int], None]  # (topic, offsets)
_ON_GAP: weakref.WeakKeyDictionary[AppT, OffsetsHandler] = weakref.WeakKeyDictionary()
_ON_REWIND: weakref.WeakKeyDictionary[AppT, OffsetsHandler] = weakref.WeakKeyDictionary()


def on_gap(app: AppT, gap: OffsetsHandler, rewind: OffsetsHandler | None = None) -> None:
    """Call ``gap`` for every gap ``app``'s consumer records and ``rewind`` for every jump it reads again
    (metrics, in the worker), each with the topic and the number of offsets."""
    _ON_GAP[app] = gap
    if rewind is not None:
        _ON_REWIND[app] = rewind


class SeekingConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer that reads a jump in a stream partition again instead of committing over it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next: dict[TP, int] = {}  # stream partition -> the offset its next record must have
        self._rewound_at: dict[TP, int] = {}  # where the last rewind went: the same jump from there is a gap

    async def perform_seek(self) -> None:
        await super().perform_seek()
        for tp in self.assignment():
            if not self._is_changelog_tp(tp):
                self._expect(tp, self._read_offset.get(tp))

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
        skipped = offset_to - offset_from + 1
        log.warning("offsets %d-%d of %s[%d] will be committed without a record (faust took them for a gap: the "
                    "markers of a transactional producer, or records skipped)", offset_from, offset_to, tp.topic,
                    tp.partition)
        handler = _ON_GAP.get(self.app)
        if handler is not None and skipped > 0:
            handler(tp.topic, skipped)
        await super()._add_gap(tp, offset_from, offset_to)
