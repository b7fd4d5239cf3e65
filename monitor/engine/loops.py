"""The stateless loops: the judge and the sinks. Each reads its topic in a consumer group of its own, does its work
(an API call, a database write), produces what follows and commits, at least once. Nothing here keeps state
that must survive a crash: a record whose work did not finish is read again by the partition's next owner.

The judge keeps several calls in flight and commits, per partition, the unbroken run of finished offsets. A
revocation (a handover: SIGTERM, scale out or in) waits up to ``grace_s`` for the calls in flight on the revoked
partitions, commits what finished and cancels the rest, so the next owner re-judges only the cancelled calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError
from aiokafka.structs import ConsumerRecord

from monitor.engine.checkpoint import DeliveryFailed, send_records
from monitor.stages.deadletter import DeadLetter, dead_letter
from monitor.stages.export import update_consumer_lag
from monitor.stages.judging import JudgeStage
from monitor.stages.labels import LabelSink
from monitor.stages.lag import lag_by_topic
from monitor.stages.sends import Send
from monitor.stages.verdicts import verdict_record

log = logging.getLogger(__name__)
LAG_INTERVAL_S = 5.0  # how often the judge topic's lag gauge is read, as the writer's
SendDead = Callable[[DeadLetter], Awaitable[asyncio.Future[Any]]]


async def delivered(producer: AIOKafkaProducer, sends: Sequence[tuple[str, Send]], dead: Sequence[DeadLetter],
                    send_dead: SendDead, partitions: int) -> None:
    """Produce and wait for every acknowledgement; DeliveryFailed if one is refused."""
    futures = [f for topic, s in sends for f in await send_records(producer, topic, [s], partitions)]
    futures += [await send_dead(letter) for letter in dead]
    for future in futures:
        try:
            await future
        except Exception as exc:
            raise DeliveryFailed(f"{type(exc).__name__}: {exc}") from exc


class Offsets:
    """Per partition: the offsets taken and those finished; the commit point is the first unfinished one."""

    def __init__(self) -> None:
        self.taken: dict[TopicPartition, list[int]] = {}
        self.finished: dict[TopicPartition, set[int]] = {}

    def take(self, tp: TopicPartition, offset: int) -> bool:
        """Whether ``offset`` is new: a record fetched again (after a seek) is not taken twice."""
        taken = self.taken.setdefault(tp, [])
        if taken and offset <= taken[-1]:
            return False
        taken.append(offset)
        return True

    def finish(self, tp: TopicPartition, offset: int) -> None:
        self.finished.setdefault(tp, set()).add(offset)

    def committable(self, tps: Sequence[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """The next offset to commit per partition whose unbroken finished run moved; forgets that run."""
        out = {}
        for tp in list(self.taken) if tps is None else tps:
            taken, done = self.taken.get(tp, []), self.finished.get(tp, set())
            n = 0
            while n < len(taken) and taken[n] in done:
                done.discard(taken[n])
                n += 1
            if n:
                out[tp] = taken[n - 1] + 1
                del taken[:n]
        return out

    def forget(self, tps: Sequence[TopicPartition]) -> None:
        for tp in tps:
            self.taken.pop(tp, None)
            self.finished.pop(tp, None)


class JudgeLoop(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka's listener is an untyped ABC
    def __init__(self, consumer: AIOKafkaConsumer, producer: AIOKafkaProducer, stage: JudgeStage,
                 send_dead: SendDead, *, verdicts: str, labels: str, partitions: int, concurrency: int,
                 grace_s: float, seed: ConsumerRebalanceListener | None = None) -> None:
        self.consumer, self.producer, self.stage, self.send_dead = consumer, producer, stage, send_dead
        self.verdicts, self.labels, self.partitions = verdicts, labels, partitions
        self.slots, self.concurrency = asyncio.Semaphore(concurrency), concurrency
        self.grace_s = grace_s
        self.offsets = Offsets()
        self.calls: dict[asyncio.Task[None], TopicPartition] = {}
        self.failure: BaseException | None = None
        self.seed = seed  # where a partition never committed starts (engine/upgrade.py)
        self.generation = 0  # bumped by every revocation: a fetch from before one is abandoned
        self.lag_at = 0.0

    async def run(self) -> None:
        while self.failure is None:
            if time.monotonic() - self.lag_at >= LAG_INTERVAL_S:
                await self._lag()
            generation = self.generation
            fetched = await self.consumer.getmany(timeout_ms=500, max_records=self.concurrency)
            for record in [r for records in fetched.values() for r in records]:
                await self.slots.acquire()
                tp = TopicPartition(record.topic, record.partition)
                # a rebalance meanwhile: the rest of the fetch is read again by whoever owns it now
                if generation != self.generation or not self.offsets.take(tp, record.offset):
                    self.slots.release()
                    if generation != self.generation:
                        break
                    continue
                task = asyncio.create_task(self._judge(tp, record))
                self.calls[task] = tp
                task.add_done_callback(self._done)
            await self._commit(self.offsets.committable(list(self.consumer.assignment())))
        raise self.failure

    async def _judge(self, tp: TopicPartition, record: ConsumerRecord) -> None:
        headers = [(k, bytes(v)) for k, v in record.headers]
        verdict, out = await self.stage.verdict(record.value, record.key, record.partition, headers)
        sends = [(self.labels, s) for s in out.labels]
        if verdict is not None:
            sends.append((self.verdicts, verdict_record(verdict)))
        await delivered(self.producer, sends, out.dead, self.send_dead, self.partitions)
        self.offsets.finish(tp, record.offset)

    async def _lag(self) -> None:
        """Judge records not judged yet on this worker's partitions (from the first unfinished one to the end)."""
        self.lag_at = time.monotonic()
        owned = list(self.consumer.assignment())
        high = {(tp.topic, tp.partition): self.consumer.highwater(tp) for tp in owned}
        processed = {}  # the offset before the first one not judged yet
        for tp in owned:
            taken = self.offsets.taken.get(tp)
            processed[(tp.topic, tp.partition)] = (taken[0] if taken else await self.consumer.position(tp)) - 1
        # every subscribed topic, at 0 too where this worker owns none of it now
        for topic, lag in lag_by_topic(high.keys(), self.consumer.subscription(), highwater=high,
                                       processed=processed).items():
            update_consumer_lag(self.stage.metrics, topic, lag)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.calls.pop(task, None)
        self.slots.release()
        if not task.cancelled() and task.exception() is not None and self.failure is None:
            self.failure = task.exception()

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        """A commit the group refuses (it is rebalancing, or moved on) is not fatal: the next owner re-reads
        from the last commit, and only what finished after it is judged again."""
        if offsets:
            try:
                await self.consumer.commit(offsets)
            except (CommitFailedError, IllegalStateError) as exc:
                log.warning("judge offsets not committed (%s): the partitions' next owner reads them again",
                            type(exc).__name__)

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        """Wait (bounded) for the revoked partitions' calls, commit what finished, cancel the rest."""
        self.generation += 1
        await self.drain(list(revoked))

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        """aiokafka only logs a callback's exception: a failed seed stops the loop instead (or the judge would read
        the whole retained topic again)."""
        if self.seed is not None:
            await self.seed.on_partitions_assigned(assigned)
            self.failure = self.failure or getattr(self.seed, "failure", None)

    async def drain(self, tps: list[TopicPartition] | None = None) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.grace_s
        while mine := [t for t, tp in self.calls.items() if tps is None or tp in tps]:
            _, late = await asyncio.wait(mine, timeout=max(0.0, deadline - loop.time()))
            if late and loop.time() >= deadline:
                for task in late:
                    task.cancel()
                log.warning("handover: %d judge calls cancelled after %.0fs; their next owner judges them again",
                            len(late), self.grace_s)
                await asyncio.wait(late)
        await self._commit(self.offsets.committable(tps))
        if tps is not None:
            self.offsets.forget(tps)


class SinkLoop:
    """Store a topic's records in batches (the store retries through outages); commit once stored or
    dead-lettered."""

    def __init__(self, consumer: AIOKafkaConsumer, sink: LabelSink, send_dead: SendDead, producer: AIOKafkaProducer,
                 *, stage: str, batch: int, max_request_bytes: int, seed: Any = None) -> None:
        self.consumer, self.sink, self.send_dead, self.producer = consumer, sink, send_dead, producer
        self.stage, self.batch, self.max_request_bytes = stage, batch, max_request_bytes
        self.seed = seed  # its group's listener (engine/upgrade.py): a failure there stops the loop

    async def run(self) -> None:
        while True:
            if self.seed is not None and self.seed.failure is not None:
                raise self.seed.failure
            fetched = await self.consumer.getmany(timeout_ms=1000, max_records=self.batch)
            records = [r for rs in fetched.values() for r in rs]
            if not records:
                continue
            rejected = await self.sink.store([(r.key, r.value or b"") for r in records])
            dead = [dead_letter(bad.raw, bad.key, reason=bad.reason, detail=bad.detail, stage=self.stage,
                                max_bytes=self.max_request_bytes) for bad in rejected]
            await delivered(self.producer, [], dead, self.send_dead, 1)
            try:
                await self.consumer.commit({tp: rs[-1].offset + 1 for tp, rs in fetched.items() if rs})
            except (CommitFailedError, IllegalStateError) as exc:  # a rebalance: stored again by the next owner
                log.warning("%s offsets not committed (%s): the next owner stores them again (an upsert)",
                            self.stage, type(exc).__name__)
