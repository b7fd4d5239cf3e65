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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.structs import ConsumerRecord

from monitor.engine.checkpoint import DeliveryFailed
from monitor.stages.deadletter import DeadLetter, dead_letter
from monitor.stages.hotpath import Send
from monitor.stages.judging import JudgeStage
from monitor.stages.labels import LabelSink
from monitor.stages.verdicts import verdict_record

log = logging.getLogger(__name__)
SendDead = Callable[[DeadLetter], Awaitable[asyncio.Future[Any]]]


async def delivered(producer: AIOKafkaProducer, sends: Sequence[tuple[str, Send]], dead: Sequence[DeadLetter],
                    send_dead: SendDead, partitions: int) -> None:
    """Produce and wait for every acknowledgement; DeliveryFailed if one is refused."""
    futures = []
    for topic, s in sends:
        partition = None if s.partition is None else s.partition % partitions
        futures.append(await producer.send(topic, value=s.value, key=s.key, partition=partition, headers=s.headers))
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

    def take(self, tp: TopicPartition, offset: int) -> None:
        self.taken.setdefault(tp, []).append(offset)

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

    async def run(self) -> None:
        while self.failure is None:
            fetched = await self.consumer.getmany(timeout_ms=500, max_records=self.concurrency)
            for tp, records in fetched.items():
                for record in records:
                    await self.slots.acquire()
                    if tp not in self.consumer.assignment():  # revoked meanwhile: its next owner judges it
                        self.slots.release()
                        continue
                    self.offsets.take(tp, record.offset)
                    task = asyncio.create_task(self._judge(tp, record))
                    self.calls[task] = tp
                    task.add_done_callback(self._done)
            await self._commit(self.offsets.committable())
        raise self.failure

    async def _judge(self, tp: TopicPartition, record: ConsumerRecord) -> None:
        headers = [(k, bytes(v)) for k, v in record.headers]
        verdict, out = await self.stage.verdict(record.value, record.key, record.partition, headers)
        sends = [(self.labels, s) for s in out.labels]
        if verdict is not None:
            sends.append((self.verdicts, verdict_record(verdict)))
        await delivered(self.producer, sends, out.dead, self.send_dead, self.partitions)
        self.offsets.finish(tp, record.offset)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.calls.pop(task, None)
        self.slots.release()
        if not task.cancelled() and task.exception() is not None and self.failure is None:
            self.failure = task.exception()

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        if offsets:
            await self.consumer.commit(offsets)

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        """Wait (bounded) for the revoked partitions' calls, commit what finished, cancel the rest."""
        await self.drain(list(revoked))

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        if self.seed is not None:
            await self.seed.on_partitions_assigned(assigned)

    async def drain(self, tps: list[TopicPartition] | None = None) -> None:
        mine = [t for t, tp in self.calls.items() if tps is None or tp in tps]
        if mine:
            _, late = await asyncio.wait(mine, timeout=self.grace_s)
            for task in late:
                task.cancel()
            if late:
                log.warning("handover: %d judge calls cancelled after %.0fs; their next owner judges them again",
                            len(late), self.grace_s)
                await asyncio.wait(late)
        try:
            await self._commit(self.offsets.committable(tps))
        except Exception as exc:  # the group moved on: the next owner re-judges from the last commit
            log.warning("judge offsets not committed at handover: %s", type(exc).__name__)
        if tps is not None:
            self.offsets.forget(tps)


class SinkLoop:
    """Store a topic's records in batches (the store retries through outages); commit once stored or
    dead-lettered."""

    def __init__(self, consumer: AIOKafkaConsumer, sink: LabelSink, send_dead: SendDead, producer: AIOKafkaProducer,
                 *, stage: str, batch: int, max_request_bytes: int) -> None:
        self.consumer, self.sink, self.send_dead, self.producer = consumer, sink, send_dead, producer
        self.stage, self.batch, self.max_request_bytes = stage, batch, max_request_bytes

    async def run(self) -> None:
        while True:
            fetched = await self.consumer.getmany(timeout_ms=1000, max_records=self.batch)
            records = [r for rs in fetched.values() for r in rs]
            if not records:
                continue
            rejected = await self.sink.store([(r.key, r.value or b"") for r in records])
            dead = [dead_letter(bad.raw, bad.key, reason=bad.reason, detail=bad.detail, stage=self.stage,
                                max_bytes=self.max_request_bytes) for bad in rejected]
            await delivered(self.producer, [], dead, self.send_dead, 1)
            await self.consumer.commit({tp: rs[-1].offset + 1 for tp, rs in fetched.items() if rs})
