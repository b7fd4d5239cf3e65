"""Faust agents: each decodes, calls a stage (monitor/stages), hands the result to the checkpoint. Nothing here
decides anything.

The hot path is a task, not an agent: it takes the input's and the re-keyed topic's records a fetch at a time
(runtime/hotbatches.py) and runs sessionize, classify, route (with the batch's distilled uncertainties) and
count in process; the judge topic carries only the sampled slice, the scores topic one compact record per
(conversation, scorer). The judge agent and the label sink are separate: they wait on an API and a
database. Every batch's sends and table writes go through the worker's checkpoint, which checks their
delivery before the batch's offsets may commit (runtime/checkpoint.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import faust
from faust.exceptions import ConsumerNotStarted
from faust.types import Message

from monitor.runtime.abandon import unless_stopping
from monitor.runtime.app import App, Topics
from monitor.runtime.batches import unacked_event_batches
from monitor.runtime.components import Components
from monitor.runtime.topics import create_topics
from monitor.stages.deadletter import dead_letter
from monitor.stages.export import update_partition_progress
from monitor.stages.hotpath import Input, Send, is_rekeyed
from monitor.stages.labels import LabelSink
from monitor.stages.lag import lag_by_topic, partition_progress
from monitor.stages.scoring import Delivery

log = logging.getLogger(__name__)
TOPIC_CHECK_INTERVAL_S = 10.0


def register_agents(app: App, topics: Topics, c: Components) -> None:
    s, hot, checkpoint = c.settings, c.hot, c.checkpoint
    lock = c.lock  # the hot path and the sweep timer share the sessionizer; a revocation waits for it

    app.topics.add(topics.hot)  # subscribed and co-partitioned as an agent's; its records go to hot_path below
    hot_path = hot_path_loop(app, c, topics.rekeyed.get_topic_name())
    app.task(hot_path)

    @app.timer(min(s.idle_timeout_s / 4, s.allowed_lateness_s / 2 or 1.0, 5.0))
    async def sweep_sessions() -> None:
        """Idle conversations, ends past their grace, old tombstones: in the partitions this worker owns."""
        if c.ownership.ready:
            async with lock:
                now = c.ownership.refresh(hot)
                await checkpoint.commit(await c.scoring(hot.sweep(now, c.ownership.owned())), sessions=True)

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
            headers, partition = _headers(event.headers), event.message.partition
            again = Delivery(judge=[Send(event.key, event.value, headers, partition=partition)])  # same owner
            # a stopping worker does not wait for the call (minutes with a local model): monitor/runtime/abandon.py
            out = await unless_stopping(app, c.judge.handle(event.value, event.key, partition, headers,
                                                            before_count=refresh_unless_busy),
                                        partial(checkpoint.commit, again))
            if out is not None:
                await checkpoint.commit(out)

    async def sink(stream: faust.StreamT[Any], store: LabelSink, stage: str) -> None:
        """Acknowledge a batch only once it is stored (``store`` retries through outages) or dead-lettered."""
        async for events in unacked_event_batches(stream, s.label_buffer_max, within=1.0):
            rejected = await store.store([(e.key, e.value) for e in events])
            if rejected:  # a stored batch sends nothing: it need not wait for the hot path's deliveries
                await checkpoint.commit(Delivery(dead=[
                    dead_letter(bad.raw, bad.key, reason=bad.reason, detail=bad.detail, stage=stage,
                                max_bytes=s.max_request_bytes) for bad in rejected]))
            for event in events:
                await stream.ack(event)

    @app.agent(topics.labels)
    async def label_sink(stream: faust.StreamT[Any]) -> None:
        await sink(stream, c.pipeline.labels, "labels")

    if c.pipeline.score_sink is not None:
        scores_store = c.pipeline.score_sink

        @app.agent(topics.scores)
        async def score_sink(stream: faust.StreamT[Any]) -> None:
            """Score records into the database for drill-down, acknowledged once stored (as the label sink)."""
            await sink(stream, scores_store, "scores")

    if c.layout.tansu:  # a Tansu workaround (runtime/layout.py): a Kafka cluster does not lose its topics
        @app.timer(TOPIC_CHECK_INTERVAL_S)
        async def recreate_topics() -> None:
            """Give a broker that lost its topics (a memory-only dev broker restarted) them back, with our
            partition counts. Without it offsets never commit again."""
            try:
                await create_topics(s)
            except Exception as exc:  # broker still down: try again at the next tick
                log.warning("topic check failed: %s", type(exc).__name__)


def hot_path_loop(app: App, c: Components, rekeyed_topic: str) -> Callable[[], Awaitable[None]]:
    """The hot path: batches of the input's and the re-keyed topic's records (runtime/hotbatches.py), each
    sessionized, classified, routed and counted in process and handed to the checkpoint."""
    s, hot, checkpoint = c.settings, c.hot, c.checkpoint

    def inputs(messages: list[Message]) -> list[Input]:
        """A batch's records as the hot path reads them. Caught up: the record is its partition's last one known
        to the consumer (its clock runs with wall time only then: stages/clock.py), by the high watermarks read
        once per batch; unknown ones count as caught up (also with no consumer, as in unit tests).
        Re-keyed: read from convmon's re-keyed topic, or, in the input, re-keyed there by a worker of before
        ``<prefix>rekeyed`` (its header), which only a direct layout reads where its state is."""
        try:
            high = {tp: app.consumer.highwater(tp) for tp in {m.tp for m in messages}}
        except ConsumerNotStarted:
            high = {}
        return [Input(m.key, m.value, m.partition,
                      m.topic == rekeyed_topic or (not c.layout.forward and bool(m.headers) and is_rekeyed(m.headers)),
                      m.timestamp, (h := high.get(m.tp)) is None or m.offset + 1 >= h)
                for m in messages]

    async def handle(messages: list[Message]) -> None:
        async with c.lock:
            now = c.ownership.refresh(hot)
            await checkpoint.commit(await c.scoring(hot.ingest(inputs(messages), now)), sessions=True)

    async def hot_path() -> None:
        assert app.hot_batches is not None  # create_app's
        await app.hot_batches.run(handle, s.event_batch, within=s.classify_within_s)

    return hot_path


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

    faust keeps the last record read only in the private ``Consumer._read_offset`` (no public accessor; the public
    ``position()`` is the fetch position, ahead by whatever faust has buffered). This is the one place that reads
    it: if a faust upgrade removes it, lag falls back to 0-based positions (all lag) and the unit test in
    tests/runtime pins the attribute. The hot topics' records count as read when fetched, so the ones the hot path
    holds unprocessed (runtime/hotbatches.py) are subtracted: else a worker behind its fetches showed no lag.
    """
    read = getattr(app.consumer, "_read_offset", {})
    hot = getattr(app, "hot_batches", None)
    waiting = hot.waiting() if hot is not None else {}
    out: dict[tuple[str, int], int | None] = {}
    for tp, offset in read.items():
        last = offset - waiting[tp] if offset is not None and tp in waiting else offset
        out[(tp.topic, tp.partition)] = None if last is None or last < 0 else last
    return out
