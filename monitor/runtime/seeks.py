"""Nothing of a stream partition is fetched while faust seeks it back to its committed offset (#18).

After every assignment faust resumes the stream partitions and only then seeks them to their committed
offsets (``Recovery.on_recovery_completed`` and ``_resume_streams``, faust-streaming 0.15). The seek is
slow: aiokafka asks for each partition's committed offset in turn, and faust sets its read offsets back
only once all are in. Meanwhile the fetcher delivers a backlog into the agent's queue and moves the read
offsets on, so the first record after the seek looks like a jump: faust records the jump as a *gap* (as
it would the offsets a transactional producer's markers take), and gap offsets count as acknowledged.
Right after the seek ``flow_control.resume()`` clears the agent's queue. The records cleared there were
never processed, yet the gap lets the next commit pass them: 205-420 of 2,000 conversations, consumed
and never scored, in one run of three of the kill -9 fault (the events topic's lag read 0 at the end).

:class:`SeekingConsumer` pauses the stream partitions for the length of the seek and resumes them when
it is done; faust clears the queue right after (no await in between), before the fetcher runs again.
Every gap faust still records is counted (``convmon_consumer_gap_offsets_total{topic}``) and logged: on
a topic without transactional producers a gap means records committed without being processed.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, AppT

log = logging.getLogger(__name__)
GapHandler = Callable[[str, int], None]  # (topic, offsets in the gap)
_ON_GAP: weakref.WeakKeyDictionary[AppT, GapHandler] = weakref.WeakKeyDictionary()


def on_gap(app: AppT, handler: GapHandler) -> None:
    """Call ``handler`` for every gap ``app``'s consumer records (a metric, in the worker)."""
    _ON_GAP[app] = handler


class SeekingConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer whose seek to the committed offsets delivers nothing of a stream partition
    until every partition is back at its committed offset."""

    async def perform_seek(self) -> None:
        streams = {tp for tp in self.assignment() if not self._is_changelog_tp(tp)} - self._paused_partitions
        generation = self.app.consumer_generation_id
        self.pause_partitions(streams)
        try:
            await super().perform_seek()
        finally:
            # only what was paused here (recovery's own pauses stay), and not once a rebalance began meanwhile:
            # its recovery pauses the partitions while it restores the tables and resumes them itself
            if self.app.consumer_generation_id == generation:
                self.resume_partitions(streams)

    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        skipped = offset_to - offset_from + 1
        log.warning("offsets %d-%d of %s[%d] will be committed without a record (faust took them for a gap: the "
                    "markers of a transactional producer, or records skipped)", offset_from, offset_to, tp.topic,
                    tp.partition)
        handler = _ON_GAP.get(self.app)
        if handler is not None and skipped > 0:
            handler(tp.topic, skipped)
        await super()._add_gap(tp, offset_from, offset_to)
