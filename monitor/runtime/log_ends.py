"""Where a partition's log really ends: the high watermark of a fetch, not only the ListOffsets answer.

faust restores a table by reading its changelog partitions up to the end offsets it asked for with
ListOffsets (``Consumer.highwaters``) and then declares the table restored. The embedded Tansu broker
answers ListOffsets(latest) with the *base offset of the partition's last record batch + 1*: after 5
records in one batch then 3 in another it says 6, while its fetch responses say 8. A hot-path batch
goes to the changelog as one record batch (dedup marks, totals, then the commit record), so after a
kill -9 the successor stopped restoring inside the dead worker's last batch: it saw the batch's marks
and totals but not its commit record, took the batch for uncommitted, rolled its totals back and
deleted its marks, while the input offsets of that batch were committed. The conversations were never
counted again (and a sessions changelog cut the same way turned re-read turns into ``late_event``).
The rest of the batch reached the table only at the next rebalance.

Every fetch response carries the partition's high watermark, and Tansu reports that one correctly,
so :class:`EndCheckingConsumer` (faust's aiokafka consumer, installed through :class:`TansuTransport`)
checks each listed end with one fetch from it and uses the larger. It is loaded only against Tansu
(told at start by its cluster id: runtime/layout.py); on Kafka, whose ListOffsets is right, the two
would agree, at the cost of one short-lived client and one fetch per changelog partition per rebalance.

That short-lived client must never raise into faust: ``highwaters`` runs inside faust's recovery task,
and an exception there ends that task for the life of the process (mode logs "Terminating cancelled
task"), so no table is ever restored, ``on_rebalance_complete`` is never sent and the app's timers
never start. aiokafka's ``stop()`` right after ``start()`` does raise: it cancels its no-group
coordinator's ``_reset_committed_task`` and awaits it, and a task cancelled before its first step
re-raises ``CancelledError`` to the caller (aio-libs/aiokafka#647). That is what kept a worker given no
partitions (more members than partitions) unready for ever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, cast

import aiokafka
from aiokafka import TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from monitor.runtime.delivery import GuardedConsumer, GuardedTransport

log = logging.getLogger(__name__)
FETCH_TIMEOUT_S = 10.0


async def fetched_ends(consumer: aiokafka.AIOKafkaConsumer, listed: Mapping[TP, int | None], *,
                       timeout_s: float = FETCH_TIMEOUT_S) -> dict[TP, int | None]:
    """``listed`` raised to the high watermark of a fetch from each listed end (``consumer`` is started and
    assigned nothing). A partition without a fetch answer within ``timeout_s`` keeps its listed end (logged)."""
    ends: dict[TP, int | None] = dict(listed)
    probes = {TopicPartition(tp.topic, tp.partition): tp for tp, end in listed.items() if end is not None}
    if not probes:
        return ends
    consumer.assign(list(probes))
    for probe, tp in probes.items():
        consumer.seek(probe, int(listed[tp] or 0))
    pending = set(probes)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while pending and loop.time() < deadline:
        await consumer.getmany(*pending, timeout_ms=100, max_records=1)
        for probe in list(pending):
            highwater = consumer.highwater(probe)
            if highwater is not None:
                tp = probes[probe]
                ends[tp] = max(int(listed[tp] or 0), highwater)
                pending.discard(probe)
    if pending:
        log.warning("no fetch answer for %d partitions within %.0fs: their restore ends at the listed end offset",
                    len(pending), timeout_s)
    raised = {tp: (listed[tp], ends[tp]) for tp in probes.values() if ends[tp] != listed[tp]}
    if raised:
        log.info("end offsets past the broker's ListOffsets answer: %s", raised)
    return ends


async def checked_ends(listed: Mapping[TP, int | None], **client: Any) -> dict[TP, int | None]:
    """``listed`` checked by :func:`fetched_ends` from a client of its own (``client``: AIOKafkaConsumer
    arguments), or returned as it is, without a client, when no partition has a listed end."""
    if all(end is None for end in listed.values()):  # an idle member's rebalance: nothing to restore
        return dict(listed)
    probe = aiokafka.AIOKafkaConsumer(enable_auto_commit=False, group_id=None, fetch_max_wait_ms=100, **client)
    await probe.start()
    try:
        return await fetched_ends(probe, listed)
    finally:
        await stop_probe(probe)


async def stop_probe(probe: aiokafka.AIOKafkaConsumer) -> None:
    """``probe.stop()`` once its no-group coordinator's task has run its first step: stopped before that,
    aiokafka re-raises the task's ``CancelledError`` to us (aio-libs/aiokafka#647) and skips closing its
    fetcher and connections. The task was scheduled by ``start()``; one pass of the loop runs it."""
    await asyncio.sleep(0)
    await probe.stop()


class EndCheckingConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer whose ``highwaters`` (the end of a table's restore) are checked by a fetch."""

    async def highwaters(self, *partitions: TP) -> Mapping[TP, int]:
        listed = await super().highwaters(*partitions)
        if self.app.in_transaction:  # faust reads the last stable offsets then, not ListOffsets
            return listed
        conf = self.app.conf
        ends = await checked_ends(
            listed,
            bootstrap_servers=faust_aiokafka.server_list(self.transport.url, faust_aiokafka.Transport.default_port),
            client_id=f"{conf.broker_client_id}-end-check",
            request_timeout_ms=int(conf.broker_request_timeout * 1000.0),
            **faust_aiokafka.credentials_to_aiokafka_auth(conf.broker_credentials, conf.ssl_context),
        )
        return cast(Mapping[TP, int], ends)  # None stays None: faust reads it as "no end known", as before


class TansuConsumer(EndCheckingConsumer, GuardedConsumer):
    """The worker's consumer against Tansu: guarded commits and seeks (runtime/delivery.py), checked restore ends."""


class TansuTransport(GuardedTransport):
    Consumer = TansuConsumer
