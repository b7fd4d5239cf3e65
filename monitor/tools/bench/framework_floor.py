"""The monitor's topology with the work taken out: what faust itself costs per conversation.

``bench throughput`` compares the monitor with a bare aiokafka consumer. The gap has two parts: our
work (decode, featurize, predict, export) and the stream framework's (every stage is a faust agent
and every arrow a Kafka topic, as DESIGN.md requires). This app keeps the second and drops the
first: the same app settings, the same topics and the same hops (events -> conversations -> scores,
a second agent on conversations as the router, and a table write per score as the exporter's
dedup), with agents that only pass bytes on. Its rate is the ceiling of any monitor built this
way, measured in the same run as the raw consumer.

Run it as a worker process: ``python -m monitor.tools.bench.framework_floor`` with ``CONVMON_*`` settings.
"""

from __future__ import annotations

import faust
import orjson

from monitor.contracts.settings import Settings
from monitor.runtime.app import create_app
from monitor.runtime.worker import run_worker


def build_floor_app(settings: Settings) -> faust.App:
    app, topics = create_app(settings)
    counted = app.Table("scored", partitions=settings.topic_partitions)

    @app.agent(topics.events)
    async def relay(stream: faust.StreamT) -> None:
        """The sessionizer's path for a finished conversation: forward the bytes, keyed."""
        async for key, raw in stream.items():
            await topics.conversations.send(key=key, value=raw)

    @app.agent(topics.conversations)
    async def route(stream: faust.StreamT) -> None:
        """The router: a second consumer of conversations that sends nothing (sample_rate 0)."""
        async for _ in stream.items():
            pass

    @app.agent(topics.conversations)
    async def score(stream: faust.StreamT) -> None:
        """The classifier minus the model: one small record per conversation on scores."""
        async for key, raw in stream.items():
            record = {"scorer": "distilled", "conversation_id": orjson.loads(raw)["conversation_id"]}
            await topics.scores.send(key=key, value=orjson.dumps(record))

    @app.agent(topics.scores)
    async def count(stream: faust.StreamT) -> None:
        """The exporter's dedup write (a changelog message per score), without the counters."""
        async for key, _ in stream.items():
            counted[key] = 1

    return app


def main() -> None:
    run_worker(Settings(), build=build_floor_app)


if __name__ == "__main__":
    main()
