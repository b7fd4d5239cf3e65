"""`convmon worker`'s engine: the partition writer, the judge loop and the sinks, in one process.

Four consumer groups, each with one job: ``<app_id>-writer`` (input, re-keyed and verdicts topics),
``<app_id>-judge``, ``<app_id>-labels`` and ``<app_id>-scores`` (the sinks). Only the writer keeps state. The
label and score retention purge runs where state partition 0 is written, so one worker in the deployment owns it.
SIGTERM ends the loops in order: the writer finishes and commits its batch, the judge waits (bounded) for its
calls in flight and commits what finished, every consumer leaves its group so the partitions move at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.assignors.range import RangePartitionAssignor

from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import Settings
from monitor.engine.changelog import Write
from monitor.engine.checkpoint import Checkpoint, DeliveryFailed, TopicSender
from monitor.engine.loops import JudgeLoop, SinkLoop
from monitor.engine.stages import build_stages
from monitor.engine.upgrade import StartWhereFaustWas, refuse_beside_faust
from monitor.engine.writer import Names, Writer, partition_stores
from monitor.runtime.clients import aiokafka_kwargs, bootstrap
from monitor.runtime.deadletter import DeadLetters
from monitor.runtime.health import HEARTBEAT_S, Health
from monitor.runtime.input_watch import InputWatch
from monitor.runtime.layout import BrokerLayout, report_layout
from monitor.runtime.retention import PURGE_INTERVAL_S, purge_once
from monitor.runtime.tansu import keep_topics
from monitor.runtime.topics import STATE_CHANGELOG
from monitor.runtime.wiring import Pipeline

log = logging.getLogger(__name__)
WRITER_REBALANCE_TIMEOUT_MS = 60_000
HANDOVER_GRACE_S = 20.0  # a revoked or stopping judge waits this long for its calls in flight


def changelog_topic(app_id: str) -> str:
    return f"{app_id}-{STATE_CHANGELOG}-changelog"


class EngineWorker:
    def __init__(self, settings: Settings, pipeline: Pipeline, layout: BrokerLayout, health: Health) -> None:
        s = self.settings = settings
        self.pipeline, self.layout, self.health = pipeline, layout, health
        kw: dict[str, Any] = {"bootstrap_servers": bootstrap(s.kafka), **aiokafka_kwargs(s.kafka)}
        self.producer = AIOKafkaProducer(linger_ms=5, acks="all", max_request_size=s.max_request_bytes,
                                         max_batch_size=min(1 << 20, s.max_request_bytes), **kw)

        def group(group_id: str, **extra: Any) -> AIOKafkaConsumer:
            return AIOKafkaConsumer(group_id=group_id, enable_auto_commit=False, auto_offset_reset="earliest",
                                    session_timeout_ms=10_000, heartbeat_interval_ms=1_000,
                                    partition_assignment_strategy=(RangePartitionAssignor,), **extra, **kw)

        # a revocation waits for the batch in progress (a full MiniLM batch took 18.5 s on 2 cores): the group waits
        # this long for the member to rejoin before it drops it (aiokafka's default is the 10 s session timeout)
        self.consumer = group(f"{s.app_id}-writer", max_partition_fetch_bytes=s.max_request_bytes,
                              rebalance_timeout_ms=WRITER_REBALANCE_TIMEOUT_MS)
        self.judge_consumer = group(f"{s.app_id}-judge")
        self.sink_consumers = {"labels": group(f"{s.app_id}-labels")}
        if pipeline.score_sink is not None:
            self.sink_consumers["scores"] = group(f"{s.app_id}-scores")
        self.restorer = AIOKafkaConsumer(enable_auto_commit=False, **kw)
        self.admin = AIOKafkaAdminClient(**kw)
        self.dead_letters = DeadLetters(TopicSender(self.producer, s.topic("dead-letters")), pipeline.metrics,
                                        max_bytes=s.max_request_bytes, reference=pipeline.exporter.reference,
                                        redactor=pipeline.redactor, keep_raw=s.dead_letter_raw)
        pending: list[Write] = []
        self.stores = partition_stores(pending)
        self.stages = build_stages(pipeline, layout, *self.stores)
        self.names = Names(input=layout.input_topic, rekeyed=s.topic("rekeyed"), verdicts=s.topic("verdicts"),
                           changelog=changelog_topic(s.app_id), group=f"{s.app_id}-writer", faust_group=s.app_id,
                           direct=not layout.forward)
        self.checkpoint = Checkpoint(
            self.producer, self.consumer, pipeline.metrics, changelog=self.names.changelog,
            topics={"rekey": s.topic("rekeyed"), "judge": s.topic("judge"), "scores": s.topic("scores"),
                    "labels": s.topic("labels")},
            partitions=s.topic_partitions, pending=pending, send_dead=self.dead_letters.send_letter,
            state_topics=frozenset({self.names.rekeyed, self.names.verdicts} | ({layout.input_topic}
                                                                                if self.names.direct else set())),
            export=self.stages.totals.written)
        self.writer = Writer(self.names, self.consumer, self.producer, self.restorer, self.admin, self.checkpoint,
                             self.stages.hot, self.stages.scoring, self.stages.judge, self.stores, health,
                             batch=s.event_batch, within_s=s.classify_within_s,
                             max_request_bytes=s.max_request_bytes,
                             sweep_s=min(s.idle_timeout_s / 4, s.allowed_lateness_s / 2 or 1.0, 5.0))
        self.judge = JudgeLoop(self.judge_consumer, self.producer, self.stages.judge, self.dead_letters.send_letter,
                               verdicts=s.topic("verdicts"), labels=s.topic("labels"), partitions=s.topic_partitions,
                               concurrency=s.judge_concurrency, grace_s=HANDOVER_GRACE_S,
                               seed=StartWhereFaustWas(self.judge_consumer, self.admin, f"{s.app_id}-judge", s.app_id))
        sinks = {"labels": pipeline.labels, "scores": pipeline.score_sink}
        self.seeds = {name: StartWhereFaustWas(c, self.admin, f"{s.app_id}-{name}", s.app_id)
                      for name, c in self.sink_consumers.items()}
        self.sinks = [SinkLoop(c, sinks[name], self.dead_letters.send_letter, self.producer, stage=name,  # type: ignore[arg-type]
                               batch=s.label_buffer_max, max_request_bytes=s.max_request_bytes, seed=self.seeds[name])
                      for name, c in self.sink_consumers.items()]

    async def run(self) -> None:
        s = self.settings
        report_layout(self.layout, self.pipeline.metrics)
        await self.producer.start()
        await self.admin.start()
        await refuse_beside_faust(self.admin, s.app_id, tansu=self.layout.tansu)
        await self.restorer.start()
        self.consumer.subscribe([self.names.input, self.names.rekeyed, self.names.verdicts], listener=self.writer)
        self.judge_consumer.subscribe([s.topic("judge")], listener=self.judge)
        for name, consumer in self.sink_consumers.items():
            consumer.subscribe([s.topic(name)], listener=self.seeds[name])
        consumers = [self.consumer, self.judge_consumer, *self.sink_consumers.values()]
        for consumer in consumers:
            await consumer.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        jobs: list[Coroutine[Any, Any, None]] = [
            self.writer.run(), self.judge.run(), *(sink.run() for sink in self.sinks), self._heartbeat(),
            self._retention(), self._input_watch()]
        if self.layout.tansu:  # the development broker's workaround (runtime/tansu.py); Kafka never loses topics
            jobs.append(keep_topics(s.kafka))
        tasks = [asyncio.create_task(job) for job in jobs]
        stopping = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait([*tasks, stopping], return_when=asyncio.FIRST_COMPLETED)
        failed = [t for t in done if t is not stopping and not t.cancelled() and t.exception() is not None]
        async with self.writer.lock:  # the batch in progress commits first
            for task in tasks:
                task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        failed += [t for t, r in zip(tasks, results, strict=True)
                   if isinstance(r, Exception) and t not in failed]  # one that failed as the stop came
        with contextlib.suppress(Exception):  # the writer's partitions move at once, not after the judge's drain
            await self.consumer.stop()
        if not failed:
            await self.judge.drain()
        for consumer in consumers[1:]:
            with contextlib.suppress(Exception):
                await consumer.stop()
        for client in (self.restorer, self.admin, self.producer):
            with contextlib.suppress(Exception):
                await client.close() if client is self.admin else await client.stop()
        if failed:
            error = failed[0].exception()
            assert error is not None
            log.critical("the worker stops: %s: %s", type(error).__name__, error)
            raise error

    async def _heartbeat(self) -> None:
        while True:
            self.health.tick()
            await asyncio.sleep(HEARTBEAT_S)

    async def _retention(self) -> None:
        """The purge, where state partition 0 is written: one owner in the deployment."""
        p = self.pipeline
        while True:
            await asyncio.sleep(PURGE_INTERVAL_S)
            if 0 in self.writer.owned:
                await purge_once(p.store, self.settings.label_retention_days, p.scores)

    async def _input_watch(self) -> None:
        watch = InputWatch(self.pipeline.metrics, self.names.input, self.settings.input_idle_warn_s)
        while True:
            await asyncio.sleep(5.0)
            line = watch.check()
            if line is not None:
                log.warning("%s", line)


def run_engine(settings: Settings, pipeline: Pipeline, layout: BrokerLayout, health: Health) -> int:
    """Run until SIGTERM (0) or a failure: 70 after a delivery that was not acknowledged (nothing more commits; a
    supervisor restarts the worker, which re-reads from the last commit), 1 otherwise."""
    async def main() -> None:  # aiokafka's clients are made inside the loop they run on
        await EngineWorker(settings, pipeline, layout, health).run()

    try:
        asyncio.run(main())
    except ConfigError as exc:
        log.critical("%s", exc)
        return 2
    except DeliveryFailed:
        log.critical("a delivery was not acknowledged: nothing more commits; the successor re-reads from the "
                     "last commit", exc_info=True)
        return 70
    except Exception:
        log.critical("the worker stops", exc_info=True)
        return 1
    return 0
