"""Faust agents: short ``async for`` loops that decode, call the plain logic, and forward.

Nothing here decides anything about satisfaction; see sessionize.py, route.py, judge/,
classify.py and export.py for that.
"""

from __future__ import annotations

import asyncio
import logging
import time

import faust
import orjson

from monitor.contracts.errors import InvalidEvent, JudgeError
from monitor.contracts.events import Conversation, EndEvent, TurnEvent, decode_event, encode
from monitor.contracts.scores import ScoreRecord
from monitor.runtime.app import Topics, aiokafka_kwargs, bootstrap, topic_names
from monitor.runtime.broker import ensure_topics
from monitor.runtime.deadletter import DeadLetters
from monitor.runtime.wiring import Pipeline
from monitor.stages import sessionize as ses
from monitor.stages.route import route

log = logging.getLogger(__name__)
TOPIC_CHECK_INTERVAL_S = 10.0


def register_agents(app: faust.App, topics: Topics, p: Pipeline) -> None:
    s = p.settings
    limits = ses.Limits(max_turns=s.max_turns, max_chars=s.max_chars)
    dlq = DeadLetters(topics.dead_letters, p.metrics, redactor=p.redactor, keep_raw=p.settings.dead_letter_raw)
    sessions = app.Table("sessions", partitions=s.topic_partitions)
    counted = app.Table("scored", partitions=s.topic_partitions)  # dedup window: (scorer, id) -> time

    @app.agent(app.topic(topics.events.get_topic_name(), topics.control.get_topic_name(),
                         key_serializer="raw", value_serializer="raw"))
    async def sessionize(stream: faust.StreamT) -> None:
        async for event in stream.events():
            raw, key = event.value, event.key
            if event.message.topic == topics.control.get_topic_name():
                await _control(raw, time.time())
                continue
            try:
                parsed = decode_event(raw, max_bytes=s.max_event_bytes)
            except InvalidEvent as exc:
                await dlq.send(raw, key, reason=exc.reason, detail=exc.detail, stage="sessionize")
                continue
            p.metrics.events.labels(parsed.type).inc()
            cid = parsed.conversation_id
            if key != cid.encode():  # unkeyed producer: re-key so one partition owns each conversation
                await topics.events.send(key=cid.encode(), value=raw)
                continue
            if isinstance(parsed, Conversation):
                p.metrics.conversations.labels("producer").inc()
                await topics.conversations.send(key=key, value=raw)
            elif isinstance(parsed, TurnEvent):
                await _turn(parsed, raw, key, event.message.partition)
            else:
                await _end(parsed, raw, key)

    async def _turn(ev: TurnEvent, raw: bytes, key: bytes, partition: int) -> None:
        state, outcome = ses.apply_turn(sessions.get(ev.conversation_id), ev, limits, time.time())
        if outcome == "late":
            p.metrics.late_events.labels("turn").inc()
            await dlq.send(raw, key, reason="late_event", detail="turn for a finished conversation",
                           stage="sessionize")
            return
        if outcome == "truncated":
            p.metrics.truncated.inc()
        state["p"] = partition
        sessions[ev.conversation_id] = state

    async def _end(ev: EndEvent, raw: bytes, key: bytes) -> None:
        state, conversation, outcome = ses.apply_end(sessions.get(ev.conversation_id), ev, time.time())
        if conversation is None:
            p.metrics.late_events.labels("end").inc()
            reason = "late_event" if outcome == "late" else "unknown_conversation"
            await dlq.send(raw, key, reason=reason, detail=f"end event: {outcome}", stage="sessionize")
            return
        sessions[ev.conversation_id] = state
        await _emit(conversation)

    async def _emit(conversation: Conversation) -> None:
        p.metrics.conversations.labels(conversation.end_reason).inc()
        await topics.conversations.send(key=conversation.conversation_id.encode(), value=encode(conversation))

    async def _control(raw: bytes, now: float) -> None:
        msg = orjson.loads(raw)
        cid, state = msg["conversation_id"], sessions.get(msg["conversation_id"])
        if state is None:
            return
        if msg["op"] == "forget" and ses.is_closed(state):
            del sessions[cid]
        elif msg["op"] == "expire" and ses.is_idle(state, now, s.idle_timeout_s):  # still idle on arrival
            sessions[cid] = ses.close(now)
            await _emit(ses.finish(cid, state, "idle", now))

    @app.timer(min(s.idle_timeout_s / 4, 5.0))
    async def sweep_sessions() -> None:
        """Find idle conversations and old tombstones in the partitions this worker owns."""
        owned = {tp.partition for tp in app.consumer.assignment() if tp.topic == topics.events.get_topic_name()}
        local = [(k, v) for k, v in list(sessions.items()) if v.get("p", -1) in owned or "closed_at" in v]
        finished, to_close, to_delete = ses.sweep(
            local, time.time(), idle_timeout_s=s.idle_timeout_s, closed_retention_s=s.closed_retention_s
        )
        for cid in to_close:
            await topics.control.send(key=cid.encode(), value=orjson.dumps({"op": "expire", "conversation_id": cid}))
        for cid in to_delete:
            await topics.control.send(key=cid.encode(), value=orjson.dumps({"op": "forget", "conversation_id": cid}))

    @app.agent(topics.conversations)
    async def route_to_judge(stream: faust.StreamT) -> None:
        async for key, raw in stream.items():
            cid = key.decode("utf-8", "replace") if key else ""
            decision = route(cid, rate=s.sample_rate, judge_accepting=p.judge.accepting())
            p.metrics.routed.labels(decision.reason).inc()
            if decision.judge:
                await topics.judge.send(key=key, value=raw)

    @app.agent(topics.judge, concurrency=s.judge_concurrency)
    async def judge(stream: faust.StreamT) -> None:
        async for key, raw in stream.items():
            try:
                conversation = Conversation.model_validate_json(raw)
                score = await p.judge.score(conversation)
            except JudgeError as exc:
                await dlq.send(raw, key, reason=exc.reason, detail=str(exc), stage="judge")
                continue
            except ValueError as exc:
                await dlq.send(raw, key, reason="invalid_schema", detail=str(exc), stage="judge")
                continue
            score = p.calibrate(score)  # calibrated P(satisfied) when a calibration model is live
            score = score.model_copy(update={"sample_weight": 1.0 / s.sample_rate if s.sample_rate else 1.0})
            await topics.scores.send(key=key, value=encode(score))
            label = {"conversation": conversation.model_dump(mode="json"), "score": score.model_dump(mode="json")}
            await topics.labels.send(key=key, value=orjson.dumps(label))

    @app.agent(topics.conversations)
    async def classify(stream: faust.StreamT) -> None:
        loop = asyncio.get_running_loop()
        async for batch in stream.take(s.classify_batch, within=s.classify_within_s):
            conversations = []
            for raw in batch:
                try:
                    conversations.append(Conversation.model_validate_json(raw))
                except ValueError as exc:
                    await dlq.send(raw, None, reason="invalid_schema", detail=str(exc), stage="classify")
            records = await loop.run_in_executor(None, p.classify, conversations)
            for record in records:
                await topics.scores.send(key=record.conversation_id.encode(), value=encode(record))

    @app.agent(topics.scores)
    async def export(stream: faust.StreamT) -> None:
        async for event in stream.events():
            try:
                score = ScoreRecord.model_validate_json(event.value)
            except ValueError as exc:
                await dlq.send(event.value, event.key, reason="invalid_schema", detail=str(exc), stage="export")
                continue
            partition, now = event.message.partition, time.time()
            dedup_key = f"{score.scorer}:{score.conversation_id}"
            if counted.get(dedup_key) is not None:
                p.metrics.duplicates.labels(score.scorer).inc()
                continue
            counted[dedup_key] = [now, partition]
            p.exporter.observe(score)
            if event.message.offset % 1000 == 0:  # bound the window; only keys of this partition's changelog
                for old in [k for k, (t, part) in list(counted.items())
                            if part == partition and now - t > s.dedup_window_s]:
                    del counted[old]

    @app.agent(topics.labels)
    async def label_sink(stream: faust.StreamT) -> None:
        async for batch in stream.take(100, within=1.0):
            await p.labels.write([orjson.loads(raw) for raw in batch])

    @app.timer(TOPIC_CHECK_INTERVAL_S)
    async def recreate_topics() -> None:
        """Give a broker that lost its topics (a memory-only dev broker restarted) them back, with our
        partition counts; on a real cluster this is a no-op. Without it offsets never commit again."""
        names = [*topic_names(s), sessions.changelog_topic.get_topic_name(), counted.changelog_topic.get_topic_name()]
        try:
            await ensure_topics(bootstrap(s), names, s.topic_partitions, **aiokafka_kwargs(s))
        except Exception as exc:  # broker still down: try again at the next tick
            log.warning("topic check failed: %s", type(exc).__name__)

    if s.retrain_interval_s:
        @app.timer(s.retrain_interval_s, on_leader=True)
        async def retrain() -> None:
            """A failed retraining (label store down, bad data) must not stop the monitor: the live model
            stays and the next tick tries again. An exception escaping a faust timer crashes the app."""
            try:
                await asyncio.get_running_loop().run_in_executor(None, p.retrain)
            except Exception:
                log.exception("retraining failed; keeping the live model, retrying in %.0fs", s.retrain_interval_s)


def register_lag_timer(app: faust.App, topics: Topics, p: Pipeline, interval_s: float = 5.0) -> None:
    from monitor.stages.export import update_consumer_lag, update_partition_progress

    names = [t.get_topic_name() for t in (topics.events, topics.conversations, topics.judge, topics.scores,
                                          topics.labels)]

    owned: set[tuple[str, int]] = set()

    @app.timer(interval_s)
    async def consumer_lag() -> None:
        nonlocal owned
        lags = dict.fromkeys(names, 0)
        progress: dict[tuple[str, int], tuple[int, int]] = {}
        read = app.consumer._read_offset  # faust keeps no public accessor for the read position
        for tp in app.consumer.assignment():
            high = app.consumer.highwater(tp)
            if tp.topic in lags and high is not None:
                position = read.get(tp)
                nxt = position + 1 if position is not None else 0
                lags[tp.topic] += max(0, high - nxt)
                if position is not None:  # nothing read since assignment: no position to judge a stall by
                    progress[(tp.topic, tp.partition)] = (high - nxt, nxt)
        for topic, lag in lags.items():
            update_consumer_lag(p.metrics, topic, lag)
        owned = update_partition_progress(p.metrics, progress, owned)
