"""Faust agents: each decodes, calls a stage (monitor/stages), sends. Nothing here decides anything.

One hot-path agent per input partition reads batches of events (``take_events``) and runs
sessionize, classify, route (with the batch's distilled uncertainties) and count in process; the
judge topic carries only the sampled slice, the scores topic one compact record per
(conversation, scorer). The judge agent and the label sink are separate: they wait on an API and a
database.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import faust
from faust.exceptions import ConsumerNotStarted

from monitor.runtime.abandon import unless_stopping
from monitor.runtime.app import Topics
from monitor.runtime.batches import event_batches, unacked_event_batches
from monitor.runtime.components import Components
from monitor.runtime.topics import create_topics
from monitor.stages.export import update_partition_progress
from monitor.stages.hotpath import Input, Outputs, Send, is_rekeyed
from monitor.stages.lag import lag_by_topic, partition_progress

log = logging.getLogger(__name__)
TOPIC_CHECK_INTERVAL_S = 10.0


def register_agents(app: faust.App, topics: Topics, c: Components) -> None:
    s, p, hot = c.settings, c.pipeline, c.hot
    lock = c.lock  # the hot-path agent and the sweep timer share the sessionizer; a revocation waits for it

    async def send_all(topic: faust.TopicT, sends: Sequence[Send]) -> None:
        """Each record's delivery is watched: a failure stops offset commits (runtime/delivery.py). A record
        that names its partition goes to that number modulo convmon's partition count (stages/hotpath.py)."""
        name = topic.get_topic_name()
        for send in sends:
            partition = None if send.partition is None else send.partition % s.topic_partitions
            c.guard.watch(await topic.send(key=send.key, value=send.value, headers=send.headers,
                                           timestamp=send.timestamp, partition=partition), name)

    async def emit(out: Outputs) -> None:
        await send_all(topics.rekeyed, out.rekey)  # never to the input topic: it is the producer's
        for letter in out.dead:
            await c.dead_letters.send_letter(letter)
        accepting = p.judge.accepting()
        boost = hot.policy.boosted and (not s.active_budget_pacing or p.judge.on_pace())
        for start in range(0, len(out.closed), s.classify_batch):
            chunk = out.closed[start:start + s.classify_batch]
            records = await asyncio.get_running_loop().run_in_executor(None, p.classify, [cv for cv, _ in chunk])
            judged = hot.judge_slice(chunk, judge_accepting=accepting, boost=boost, records=records)
            await send_all(topics.judge, judged)
            records = hot.mark_shadows(records, judged)
            await send_all(topics.scores, hot.count(records, {cv.conversation_id: n for cv, n in chunk}, time.time()))

    async def emit_then_release(out: Outputs) -> None:
        """The sessions' changelog writes of a batch (held since before it was sessionized) go out only once
        its counts, scores and dead letters are on the broker: a crash in between re-delivers the batch to
        sessions as they were before it, instead of to tombstones of conversations whose counts were lost."""
        await emit(out)
        await app.producer.flush()
        await c.counts.wait_acked()  # the batch's commit records are on the broker
        c.sessions.release()
        await c.sessions.flush()  # handed to the producer before the batch's events are acknowledged

    def highwaters(events: list[Any]) -> dict[Any, int | None]:
        """The high watermark of each partition in a batch, read once per batch: a record is caught up when it is
        its partition's last one known to the consumer (the partition's clock runs with wall time only then:
        stages/clock.py); an unknown high watermark counts as caught up (also with no consumer thread, as under
        faust's agent.test_context())."""
        try:
            return {tp: app.consumer.highwater(tp) for tp in {e.message.tp for e in events}}
        except ConsumerNotStarted:
            return {}

    rekeyed_topic = topics.rekeyed.get_topic_name()

    def rekeyed(event: Any) -> bool:
        """Read from convmon's re-keyed topic; or, in the input, re-keyed there by a worker of before
        ``<prefix>rekeyed`` (its header), which only a direct layout reads where its state is."""
        return bool(event.message.topic == rekeyed_topic or (not c.layout.forward and is_rekeyed(event.headers)))

    @app.agent(topics.hot)  # the input topic and convmon's re-keyed topic
    async def hot_path(stream: faust.StreamT[Any]) -> None:
        async for events in event_batches(stream, s.event_batch, within=s.classify_within_s):
            async with lock:
                now = c.ownership.refresh(hot)
                c.sessions.hold()
                high = highwaters(events)
                batch = [Input(e.key, e.value, e.message.partition, rekeyed(e), e.message.timestamp,
                               (h := high.get(e.message.tp)) is None or e.message.offset + 1 >= h) for e in events]
                await emit_then_release(hot.ingest(batch, now))

    @app.timer(min(s.idle_timeout_s / 4, s.allowed_lateness_s / 2 or 1.0, 5.0))
    async def sweep_sessions() -> None:
        """Idle conversations, ends past their grace, old tombstones: in the partitions this worker owns."""
        if c.ownership.ready:
            async with lock:
                now = c.ownership.refresh(hot)
                c.sessions.hold()
                await emit_then_release(hot.sweep(now, c.ownership.owned()))

    def refresh_unless_busy() -> None:
        """A rebalance during a judge call (retries can take a minute): rebuild the partition state before the
        call is counted, unless a hot-path batch holds it (then that record is sent but not counted)."""
        if c.ownership.dirty and not lock.locked():
            c.ownership.refresh(hot)

    @app.agent(topics.judge, concurrency=s.judge_concurrency)
    async def judge(stream: faust.StreamT[Any]) -> None:
        async for event in stream.events():
            if c.ownership.dirty:  # the dedup window must be rebuilt before it answers
                async with lock:
                    c.ownership.refresh(hot)
            headers = _headers(event.headers)

            async def requeue(key: bytes = event.key, value: bytes = event.value,
                              headers: list[tuple[str, bytes]] = headers,
                              partition: int = event.message.partition) -> None:
                await send_all(topics.judge, [Send(key, value, headers, partition=partition)])  # same owner
                await app.producer.flush()  # on the broker before the event's offset can be committed

            # a stopping worker does not wait for the call (minutes with a local model): monitor/runtime/abandon.py
            out = await unless_stopping(app, c.judge.handle(event.value, event.key, event.message.partition, headers,
                                                            before_count=refresh_unless_busy), requeue)
            if out is None:
                continue
            await c.counts.flush()  # its dedup marks and totals
            await send_all(topics.scores, out.scores)
            await send_all(topics.labels, out.labels)
            for letter in out.dead:
                await c.dead_letters.send_letter(letter)

    @app.agent(topics.labels)
    async def label_sink(stream: faust.StreamT[Any]) -> None:
        """Acknowledge a batch only once it is stored (``store`` retries through outages) or dead-lettered."""
        async for events in unacked_event_batches(stream, s.label_buffer_max, within=1.0):
            rejected = await p.labels.store([(e.key, e.value) for e in events])
            for bad in rejected:
                await c.dead_letters.send(bad.raw, bad.key, reason=bad.reason, detail=bad.detail, stage="labels")
            if rejected:
                await app.producer.flush()  # the dead letters are on the broker before their offsets commit
            for event in events:
                await stream.ack(event)

    if p.score_sink is not None:
        sink = p.score_sink

        @app.agent(topics.scores)
        async def score_sink(stream: faust.StreamT[Any]) -> None:
            """Score records into the database for drill-down, acknowledged once stored (as the label sink)."""
            async for events in unacked_event_batches(stream, s.label_buffer_max, within=1.0):
                rejected = await sink.store([(e.key, e.value) for e in events])
                for bad in rejected:
                    await c.dead_letters.send(bad.raw, bad.key, reason=bad.reason, detail=bad.detail, stage="scores")
                if rejected:
                    await app.producer.flush()
                for event in events:
                    await stream.ack(event)

    if c.layout.tansu:  # a Tansu workaround (runtime/layout.py): a Kafka cluster does not lose its topics
        @app.timer(TOPIC_CHECK_INTERVAL_S)
        async def recreate_topics() -> None:
            """Give a broker that lost its topics (a memory-only dev broker restarted) them back, with our
            partition counts. Without it offsets never commit again."""
            try:
                await create_topics(s)
            except Exception as exc:  # broker still down: try again at the next tick
                log.warning("topic check failed: %s", type(exc).__name__)


def _headers(headers: object) -> list[tuple[str, bytes]]:
    if isinstance(headers, dict):
        return [(str(k), bytes(v)) for k, v in headers.items()]
    return [(str(k), bytes(v)) for k, v in (headers or [])]  # type: ignore[attr-defined]


def register_lag_timer(app: faust.App, topics: Topics, c: Components, interval_s: float = 5.0) -> None:
    names = [t.get_topic_name() for t in (topics.events, topics.rekeyed, topics.judge, topics.labels)]

    reported: set[tuple[str, int]] = set()

    @app.timer(interval_s)
    async def consumer_lag() -> None:
        nonlocal reported
        owned = [(tp.topic, tp.partition) for tp in app.consumer.assignment()]
        high = {(tp.topic, tp.partition): app.consumer.highwater(tp) for tp in app.consumer.assignment()}
        processed = processed_offsets(app)
        for topic, lag in lag_by_topic(owned, names, highwater=high, processed=processed).items():
            c.pipeline.metrics.consumer_lag.labels(topic).set(lag)
        reported = update_partition_progress(c.pipeline.metrics, partition_progress(owned, names, highwater=high,
                                                                                    processed=processed), reported)


def processed_offsets(app: faust.App) -> dict[tuple[str, int], int | None]:
    """The offset of the last record each owned partition processed.

    faust keeps it only in the private ``Consumer._read_offset`` (no public accessor; the public
    ``position()`` is the fetch position, ahead by whatever faust has buffered). This is the one
    place that reads it: if a faust upgrade removes it, lag falls back to 0-based positions (all
    lag) and the unit test in tests/runtime pins the attribute.
    """
    read = getattr(app.consumer, "_read_offset", {})
    return {(tp.topic, tp.partition): offset for tp, offset in read.items()}
