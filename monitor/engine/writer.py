"""The partition writer: one consumer-group member reading the input, re-keyed and verdicts topics, the only writer
of the state of the partitions it is assigned. Kafka's group protocol assigns partitions with the range assignor,
which gives partition p of every topic with the same partition count to the same member; each assignment is
checked (a state partition whose re-keyed, verdicts or direct input partition went elsewhere stops the worker
loudly). One loop takes a fetch at a time, runs the stages on it (decode, sessionize, classify, route, count the
verdicts) and hands the result to the checkpoint (engine/checkpoint.py), which alone commits offsets. Idle sweeps
are input too: every few seconds the writer sends each partition it holds sessions in a tick through the re-keyed
topic, and sweeps a partition when its tick comes back, so every state change has an input offset that commits it.
A revocation waits for the batch in progress (a lock), so every processed record is committed before the partition
moves; an assignment restores every partition it holds from its changelog (engine/changelog.py), behind a fence of its
own, before any of its records is processed: no state is kept across a rebalance. A commit the group refuses is a
lost assignment: the state goes, and comes back from the changelog with the group's next assignment (``_lost``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import ConsumerRecord

from monitor.engine.changelog import STORES, PartitionStore, Write, new_writer, restore
from monitor.engine.checkpoint import Checkpoint, CommitRefused
from monitor.engine.fetch import fetch_batch
from monitor.engine.upgrade import faust_state
from monitor.runtime.health import Health
from monitor.stages.clock import REKEYED
from monitor.stages.deadletter import dead_letter
from monitor.stages.export import update_consumer_lag, update_partition_progress
from monitor.stages.hotpath import HotPath, Input
from monitor.stages.judging import JudgeStage
from monitor.stages.lag import lag_by_topic, partition_progress
from monitor.stages.scoring import Delivery, Scoring
from monitor.stages.verdicts import BadVerdict, read_verdict

log = logging.getLogger(__name__)
RESTORE_TIMEOUT_S = 120.0
LAG_INTERVAL_S = 5.0  # how often the lag gauges are read from the consumer
TICK = "convmon-tick"  # header of a re-keyed record that asks its partition's writer to sweep idle sessions


class Misassigned(Exception):
    """A state partition's topics were not assigned together: two writers could write one partition's state."""


@dataclass(frozen=True)
class Names:
    input: str
    rekeyed: str
    verdicts: str
    changelog: str
    group: str  # the writer's consumer group
    faust_group: str  # the faust engine's (<app_id>): where a partition this group never committed starts
    direct: bool  # the input has convmon's partition count and is processed where it is read


class Writer(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka's listener is an untyped ABC
    def __init__(self, names: Names, consumer: AIOKafkaConsumer, producer: AIOKafkaProducer,
                 restorer: AIOKafkaConsumer, admin: AIOKafkaAdminClient, checkpoint: Checkpoint, hot: HotPath,
                 scoring: Scoring, judge: JudgeStage, stores: tuple[PartitionStore, PartitionStore], health: Health,
                 *, batch: int, within_s: float, sweep_s: float, max_request_bytes: int) -> None:
        self.names, self.consumer, self.producer, self.restorer, self.admin = names, consumer, producer, restorer, admin
        self.checkpoint, self.hot, self.scoring, self.judge, self.stores = checkpoint, hot, scoring, judge, stores
        self.health, self.batch, self.sweep_s, self.max_request_bytes = health, batch, sweep_s, max_request_bytes
        self.within_s = within_s  # a batch closes this long after its first record (or full): classify_within_s
        self.lock = asyncio.Lock()  # one batch (or sweep) at a time; a revocation waits for it
        self.owned: set[int] = set()  # state partitions
        self.tps: set[TopicPartition] = set()  # every assigned partition of the three topics
        self.next: dict[TopicPartition, int] = {}  # the next offset to process (what commits)
        self.epoch = 0  # bumped by every assignment change: a fetch from before one is not processed
        self.last_sweep = self.last_lag = time.monotonic()
        self.assignment: list[TopicPartition] | None = None  # assigned, paused, not restored yet
        self._reported: set[tuple[str, int]] = set()  # partitions whose progress gauges exist
        self.input_owned = 0  # input partitions restored and read here: /readyz says it (read from the HTTP thread)
        health.assigned = lambda: self.input_owned

    # -- the group's callbacks -------------------------------------------------------------------------------------
    # aiokafka stops heartbeating while a callback runs and starts fetching before on_partitions_assigned returns:
    # the assignment callback only pauses the new partitions; the loop restores them, seeks and resumes them.

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        async with self.lock:  # the batch in progress has committed when this returns
            self.epoch += 1
            self.tps -= set(revoked)
            self._count_input()
            self.assignment = None

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.epoch += 1
        self.consumer.pause(*assigned)
        self.assignment = list(assigned)

    async def _take(self, assigned: list[TopicPartition]) -> None:
        """Restore every state partition of a new assignment (each from a fence of its own: no state is kept across
        a rebalance), then read each partition from its committed offset."""
        started = time.monotonic()
        self.tps = set(assigned)
        state = self._state_partitions(self.tps)
        committed = await self._offsets(self.tps)
        await self._start_where_faust_was(committed)
        self._drop(self.owned)
        for p in sorted(state):
            await self._restore(p, {tp.topic: off for tp, off in committed.items()
                                    if tp.partition == p and tp.topic in self.checkpoint.state_topics
                                    and off is not None})
        self.owned = state
        self.hot.assign(self.owned, time.time())
        self.next = {tp: off for tp, off in committed.items() if off is not None}
        for tp in assigned:
            if tp in self.next:
                self.consumer.seek(tp, self.next[tp])
            else:
                await self.consumer.seek_to_beginning(tp)
        self.consumer.resume(*assigned)
        self.hot.restored(time.monotonic() - started)
        self._count_input()
        self.health.joined = True
        log.info("assigned state partitions %s, restored in %.1fs", sorted(state), time.monotonic() - started)

    def _count_input(self) -> None:
        self.input_owned = sum(1 for tp in self.tps if tp.topic == self.names.input)

    def _state_partitions(self, tps: Iterable[TopicPartition]) -> set[int]:
        """The state partitions of an assignment, checked: each one's re-keyed, verdicts (and direct input)
        partitions all here."""
        by_topic: dict[str, set[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, set()).add(tp.partition)
        needed = [self.names.rekeyed, self.names.verdicts] + ([self.names.input] if self.names.direct else [])
        state = set().union(*(by_topic.get(t, set()) for t in needed))
        missing = [f"{t}[{p}]" for p in sorted(state) for t in needed if p not in by_topic.get(t, set())]
        if missing:
            log.critical("the group assigned this worker state partitions %s without %s: another member would "
                         "write the same state; every member must run this version with the range assignor",
                         sorted(state), ", ".join(missing))
            raise Misassigned(", ".join(missing))
        return state

    async def _offsets(self, tps: Iterable[TopicPartition],
                       group: str | None = None) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``tps`` (None: nothing committed yet)."""
        wanted = list(tps)
        if not wanted:
            return {}
        found = await self.admin.list_consumer_group_offsets(group or self.names.group, partitions=wanted)
        return {tp: found[tp].offset if tp in found and found[tp].offset >= 0 else None for tp in wanted}

    async def _start_where_faust_was(self, committed: dict[TopicPartition, int | None]) -> None:
        """Partitions this group never committed start where the faust engine's group did (engine/upgrade.py)."""
        fresh = [tp for tp, offset in committed.items() if offset is None]
        for tp, offset in (await self._offsets(fresh, self.names.faust_group)).items():
            if offset is not None:
                committed[tp] = offset
                self.consumer.seek(tp, offset)

    async def _restore(self, partition: int, committed: dict[str, int]) -> None:
        writer = new_writer()
        restored = await restore(self.producer, self.restorer, self.names.changelog, partition, committed, writer,
                                 timeout_s=RESTORE_TIMEOUT_S)
        by_prefix = {s.prefix: s for s in self.stores}
        if restored.records == 0:  # never written here: switching from faust?
            taken = await faust_state(self.restorer, self.names.faust_group, partition, timeout_s=RESTORE_TIMEOUT_S)
            restored.rewrite.update(taken)  # logged again, in this engine's changelog
            if taken:
                log.warning("state partition %d: took %d keys (open sessions, dedup marks, totals) from the faust "
                            "engine's changelogs", partition, len(taken))
        for key, value in restored.values.items():
            store = by_prefix.get(key[:1])
            if store is not None:
                store.load(key[1:].decode(), value, partition)
        for key, value in restored.rewrite.items():
            store = by_prefix.get(key[:1])
            if store is not None and value is not None:
                store.load(key[1:].decode(), value, partition)
        # logged again before the partition is read: compaction cannot keep a skipped record, and the faust state
        # taken over is this engine's own from now on; they restate committed state, so they carry its offsets
        await self.checkpoint.restate(partition, writer, restored.rewrite, committed)
        self.checkpoint.writers[partition] = writer
        log.info("restored state partition %d: %d changelog records, %d skipped (past the committed offsets %s or "
                 "another writer's)", partition, restored.records, restored.skipped, committed)

    def _drop(self, partitions: set[int]) -> None:
        for store in self.stores:
            store.drop(partitions)
        self.checkpoint.forget(partitions)
        self.hot.revoke(partitions)

    # -- the loop --------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            if self.assignment is not None:
                async with self.lock:
                    assigned, self.assignment = self.assignment, None
                    if assigned is not None:
                        await self._take(assigned)
                continue
            epoch = self.epoch
            fetched = await fetch_batch(self.consumer, max_records=self.batch, within_s=self.within_s,
                                        interrupted=functools.partial(self.rebalanced, epoch))
            async with self.lock:
                if epoch != self.epoch:  # a rebalance came in between: read them again from where processing is
                    for tp in fetched:
                        if tp in self.tps and tp in self.next:
                            self.consumer.seek(tp, self.next[tp])
                    continue
                records = [r for tp, rs in fetched.items() if tp in self.tps for r in rs
                           if r.offset >= self.next.get(tp, 0)]
                if records:
                    try:
                        await self._process(records)
                    except CommitRefused as refused:
                        self._lost(refused)
                        continue
                if time.monotonic() - self.last_sweep >= self.sweep_s:
                    await self._tick()
            if time.monotonic() - self.last_lag >= LAG_INTERVAL_S:
                self._lag()

    def _lost(self, refused: CommitRefused) -> None:
        """The group refused a batch's commit: its outputs may be on the broker, its state changes are not committed,
        and another member may own the partitions now. Every partition's state and position goes, and its fetching
        pauses; nothing is restored (no fence written, which could outrank a new owner's) until the group assigns
        partitions again. aiokafka reset its generation (or asked to rejoin) before it raised, and its coordination
        task rejoins by itself: the listener's revocation, then assignment, which is restored as any. A transient
        coordinator error never gets here (aiokafka retries it inside commit until the commit succeeds or the group
        refuses it); any other commit error is not transient and stops the worker (CommitFailed)."""
        self.hot.metrics.commits_refused.inc()
        log.warning("%s: dropping the state of partitions %s; the group's next assignment restores them from the "
                    "committed changelog", refused, sorted(self.owned))
        self._drop(self.owned)
        self.consumer.pause(*self.consumer.assignment())
        self.owned, self.tps, self.next = set(), set(), {}
        self.hot.assign(self.owned, time.time())
        self.epoch += 1
        self._count_input()

    def rebalanced(self, epoch: int) -> bool:
        """Whether an assignment is waiting or the assignment changed since ``epoch``."""
        return self.assignment is not None or epoch != self.epoch

    async def _tick(self) -> None:
        """Ask each partition with sessions to sweep, through the re-keyed topic (not acknowledged: a lost tick
        only delays the sweep to the next one)."""
        self.last_sweep = time.monotonic()
        sessions = self.hot.sessions
        busy = {o.partition for o in sessions.open.values()} | {p for p, t in sessions.finished.items() if t}
        for p in sorted(busy & self.owned):
            await self.producer.send(self.names.rekeyed, value=b"", partition=p, headers=[(TICK, b"1")])

    async def _process(self, records: list[ConsumerRecord]) -> None:
        now = time.time()
        inputs, delivery = [], Delivery()
        verdicts, ticked = [], set()
        for r in records:
            if r.topic == self.names.verdicts:
                verdicts.append(r)
                continue
            high = self.consumer.highwater(TopicPartition(r.topic, r.partition))
            caught_up = high is None or r.offset + 1 >= high  # the partition's last record (stages/clock.py)
            seconds = r.timestamp / 1000 if r.timestamp is not None else None
            if r.topic == self.names.rekeyed and r.headers and r.headers[0][0] == TICK:
                ticked.add(r.partition)
                # a record of its re-keyed partition like any other: it runs that source's clock, or a quiet
                # partition's idle conversations never close (not the input's: stages/clock.py)
                self.hot.clock.observe(r.partition, seconds, now, caught_up=caught_up, source=REKEYED)
            else:
                inputs.append(Input(r.key, r.value, r.partition, r.topic == self.names.rekeyed, seconds, caught_up))
        if inputs:
            delivery = await self.scoring(self.hot.ingest(inputs, now))
        if ticked:
            swept = await self.scoring(self.hot.sweep(now, ticked & self.owned))
            for field in ("rekey", "dead", "judge", "scores", "labels"):
                getattr(delivery, field).extend(getattr(swept, field))
        for r in verdicts:
            verdict = read_verdict(r.value, r.headers, r.partition)
            if isinstance(verdict, BadVerdict):
                delivery.dead.append(dead_letter(r.value, r.key, reason=verdict.reason, detail=verdict.detail,
                                                 stage="judge", max_bytes=self.max_request_bytes))
            elif self.judge.count(verdict.score, verdict.partition, verdict.shadow):
                delivery.scores.append(self.judge.score_record(verdict.score))
        for r in records:
            tp = TopicPartition(r.topic, r.partition)
            self.next[tp] = max(self.next.get(tp, 0), r.offset + 1)
        await self.checkpoint.commit(delivery, {tp: off for tp, off in self.next.items() if tp in self.tps})

    def _lag(self) -> None:
        self.last_lag = time.monotonic()
        owned = [(tp.topic, tp.partition) for tp in self.tps]
        high = {(tp.topic, tp.partition): self.consumer.highwater(tp) for tp in self.tps}
        processed = {(tp.topic, tp.partition): off - 1 for tp, off in self.next.items()}
        metrics = self.hot.metrics
        topics = [self.names.input, self.names.rekeyed, self.names.verdicts]
        for topic, lag in lag_by_topic(owned, topics, highwater=high, processed=processed).items():
            update_consumer_lag(metrics, topic, lag)
        self._reported = update_partition_progress(
            metrics, partition_progress(owned, topics, highwater=high, processed=processed), self._reported)


def partition_stores(pending: list[Write]) -> tuple[PartitionStore, PartitionStore]:
    """The sessions store and the counts store (dedup marks, totals), logging into ``pending``."""
    return PartitionStore(STORES[0], pending), PartitionStore(STORES[1], pending)
