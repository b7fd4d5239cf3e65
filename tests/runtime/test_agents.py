"""The worker's real agents (monitor/runtime/agents.py) driven through faust's ``agent.test_context()``, and its
hot path through the batches its consumer fills (runtime/hotbatches.py).

No broker: events are put straight into each agent's stream or the hot path's batches, and each output topic's
``send`` is replaced by a recorder (faust's documented way to test an agent). The real-broker tests in
tests/integration cover the same agents end to end; these pin what one agent does with its input:
the hot path batches turn events into a conversation, counts and sends its distilled score and the
judge slice; the judge agent scores a judge-topic record once, sends score and label, and counts a
re-delivered record as a duplicate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import faust
import orjson
import pytest
from faust.types import TP, Message
from prometheus_client import CollectorRegistry

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import decode_score
from monitor.runtime.agents import hot_path_loop, register_agents
from monitor.runtime.app import Topics, create_app
from monitor.runtime.components import Components, build_components
from monitor.runtime.layout import BrokerLayout
from monitor.runtime.wiring import build_pipeline
from monitor.tools.simulator.generate import ConversationGenerator
from tests.support.model_fixtures import publish_distilled_model

Sent = dict[str, list[tuple[bytes, bytes, Any]]]


def agent_named(app: faust.App, name: str) -> faust.types.AgentT:
    [agent] = [a for qualified, a in app.agents.items() if qualified.endswith(f".{name}")]
    return agent


def record_sends(topics: Topics) -> Sent:
    sent: Sent = {}
    for field in ("judge", "scores", "labels", "dead_letters", "rekeyed"):
        topic = getattr(topics, field)
        sent[field] = []

        def recorder(into: list[tuple[bytes, bytes, Any]]) -> Callable[..., Any]:
            async def send(*, key: bytes, value: bytes, headers: Any = None, **_: Any) -> None:
                into.append((key, value, headers))
            return send

        topic.send = recorder(sent[field])  # type: ignore[method-assign]
    return sent


@pytest.fixture
def worker(make_settings) -> tuple[faust.App, Topics, Components, Sent]:
    settings = make_settings(broker_url="kafka://127.0.0.1:1", sample_rate=1.0, event_batch=50,
                             classify_within_s=0.1)
    publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
    pipeline = build_pipeline(settings, registry=CollectorRegistry())
    app, topics = create_app(settings)
    components = build_components(app, topics, pipeline)
    register_agents(app, topics, components)
    app.finalize()
    app.flow_control.resume()
    sent = record_sends(topics)
    sent["flush"] = []
    sessions = components.checkpoint.sessions

    async def flush() -> None:  # what the sessions table still holds back when the batch's output is flushed
        sent["flush"].append((b"flush", b"", sessions.pending))

    app.producer.flush = flush  # type: ignore[method-assign]
    sent["changelog"] = []

    async def send_many(topic: str, partition: int, records: list[Any]) -> list[Any]:
        """The tables' changelog writes (runtime/tablestore.py hands them to the producer as batches)."""
        for record in records:
            sent["changelog"].append((topic.encode(), record.key, partition))
            sent["flush"].append((b"changelog", topic.encode(), sessions.pending))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return [SimpleNamespace(future=done, records=len(records))]

    app.producer.send_many = send_many  # type: ignore[attr-defined]
    return app, topics, components, sent


class HotInput:
    """Records into the worker's hot path as its consumer hands them over (a fetch at a time), with the hot-path
    loop running as a task."""

    def __init__(self, app: faust.App, topics: Topics, c: Components) -> None:
        self.app, self.topic = app, topics.events.get_topic_name()
        self.loop = hot_path_loop(app, c, topics.rekeyed.get_topic_name())
        self.offsets: dict[int, int] = {}

    async def __aenter__(self) -> HotInput:
        self.task = asyncio.create_task(self.loop())
        return self

    async def __aexit__(self, *_: object) -> None:
        self.task.cancel()

    async def put(self, value: bytes, *, key: bytes, partition: int) -> Message:
        offset = self.offsets[partition] = self.offsets.get(partition, -1) + 1
        message = Message(self.topic, partition, offset, 1.7e9, 0, [], key, value, None,
                          tp=TP(self.topic, partition))
        await self.app.hot_batches.put([message], self.app.consumer_generation_id)
        return message


def value(metrics_registry: CollectorRegistry, name: str, **labels: str) -> float:
    """Summed over the labels not given (the metric dimensions)."""
    return sum(s.value for family in metrics_registry.collect() for s in family.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


async def wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting for the agent"
        await asyncio.sleep(0.05)


def test_hot_path_sessionizes_a_batch_counts_and_sends(worker) -> None:
    app, topics, c, sent = worker
    rubric = c.pipeline.rubric
    sim = ConversationGenerator(rubric, seed=2).generate("agent-1", 1.7e9)
    registry = c.pipeline.metrics.registry

    async def run() -> None:
        c.hot.assign({0}, now=0.0)  # as Ownership does once faust restored the tables
        async with HotInput(app, topics, c) as agent:
            messages = [await agent.put(orjson.dumps(event), key=b"agent-1", partition=0) for event in sim.events]
            await wait_for(lambda: len(sent["scores"]) == 1)
            await wait_for(lambda: all(m.acked for m in messages))  # acknowledged once the checkpoint is done
            await agent.put(b"{not json", key=b"garbage", partition=0)
            await wait_for(lambda: len(sent["dead_letters"]) == 1)

    asyncio.run(run())
    [(key, raw, _)] = sent["scores"]
    assert key == b"agent-1" and decode_score(raw, rubric).scorer == "distilled"
    [(key, raw, headers)] = sent["judge"]  # sample_rate=1: the judge slice carries the conversation
    assert key == b"agent-1" and orjson.loads(raw)["conversation_id"] == "agent-1"
    assert dict(headers)["convmon-sample-weight"] == b"1.0"
    assert dict(sent["dead_letters"][0][2])["convmon-reason"] == b"malformed_json"
    assert value(registry, "convmon_conversations_scored_total", scorer="distilled") == 1
    assert value(registry, "convmon_events_total", kind="turn") == len(sim.events) - 1
    # the conversation's partition total is committed beside its dedup mark in the scored table
    [scored] = [t for t in c.tables if t.name == "scored"]
    assert scored.data["#c|0"] == {"partition": 0, "seq": 1} and "distilled:agent-1" in scored.data
    assert sent["rekeyed"] == []  # keyed input: nothing re-keyed
    # the sessions' writes (turns, then the close) went out only after the batch's output was flushed
    assert max(held for _, _, held in sent["flush"]) >= len(sim.events) - 1
    steps = [topic if k == b"changelog" else k for k, topic, _ in sent["flush"]]
    sessions = [i for i, step in enumerate(steps) if b"sessions" in step]
    assert sessions and all(steps[i - 1] == b"flush" or b"sessions" in steps[i - 1] for i in sessions)
    assert min(i for i, step in enumerate(steps) if b"scored" in step) < max(sessions)  # the close after its count
    assert {p for _, _, p in sent["changelog"]} == {0}  # every write to its source event's partition
    assert c.checkpoint.sessions.pending == 0  # nothing left waiting once the batch is done


def test_judge_agent_scores_once_and_counts_a_redelivery_as_duplicate(worker) -> None:
    app, topics, c, sent = worker
    rubric = c.pipeline.rubric
    sim = ConversationGenerator(rubric, seed=3).generate("judged-1", 1.7e9)
    registry = c.pipeline.metrics.registry

    async def run() -> None:
        c.hot.assign({1}, now=0.0)
        async with HotInput(app, topics, c) as hot:
            for event in sim.events:
                await hot.put(orjson.dumps(event), key=b"judged-1", partition=1)
            await wait_for(lambda: len(sent["judge"]) == 1)
        key, judge_record, headers = sent["judge"][0]
        async with agent_named(app, "judge").test_context() as judge:
            for _ in range(2):  # the second is a re-delivery after a crash
                await judge.put(judge_record, key=key, partition=1, headers=headers)
            await wait_for(lambda: len([s for s in sent["scores"] if orjson.loads(s[1])["scorer"] == "llm"]) == 2)
            await judge.put(b"\x00garbage", key=b"x", partition=1)
            await wait_for(lambda: len(sent["dead_letters"]) == 1)

    asyncio.run(run())
    llm = [decode_score(raw, rubric) for _, raw, _ in sent["scores"] if orjson.loads(raw)["scorer"] == "llm"]
    assert [s.conversation_id for s in llm] == ["judged-1", "judged-1"]  # at least once on scores
    assert value(registry, "convmon_conversations_scored_total", scorer="llm") == 1  # counted once
    assert value(registry, "convmon_duplicate_scores_total", scorer="llm") == 1
    assert len(sent["labels"]) == 2 and orjson.loads(sent["labels"][0][1])["score"]["scorer"] == "llm"
    assert dict(sent["dead_letters"][0][2])["convmon-stage"] == b"judge"


@pytest.mark.parametrize("tansu", [False, True])
def test_the_topic_recreating_timer_runs_against_tansu_only(make_settings, tansu: bool) -> None:
    """A memory-only Tansu restarted loses its topics; a Kafka cluster does not (runtime/layout.py)."""
    settings = make_settings(broker_url="kafka://127.0.0.1:1")
    app, topics = create_app(settings, tansu=tansu)
    layout = BrokerLayout(settings.input_topic_name, 4, 4, tansu=tansu)
    register_agents(app, topics, build_components(app, topics, build_pipeline(settings, registry=CollectorRegistry()),
                                                  layout))
    timers = {task.__name__ for task in app._app_tasks}  # faust keeps no public list of an app's timers
    assert ("recreate_topics" in timers) == tansu and "sweep_sessions" in timers
