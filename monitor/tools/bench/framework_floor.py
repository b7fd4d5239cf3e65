"""The monitor's topology with the work taken out: what faust itself costs per conversation.

``bench throughput`` compares the monitor with a bare aiokafka consumer. The gap has two parts: our
work (validate, sessionize, featurize, predict, export) and the stream framework's (faust agents
reading Kafka topics, with changelogged tables, as docs/architecture.md draws them). This app keeps
the second and drops the first: the same app settings and the same shape (one agent reading batches
of events; on turn input one changelog write per turn, the least a restartable session store can
write; one record on scores and one dedup table write per finished conversation), with no work in
between. Its rate is the ceiling of any monitor built this way, measured in the same run as the raw
consumer.

Run it as a worker process: ``python -m monitor.tools.bench.framework_floor`` with ``CONVMON_*`` settings.
"""

from __future__ import annotations

from typing import Any

import faust
import orjson

from monitor.contracts.events import event_kind
from monitor.contracts.settings import Settings
from monitor.runtime.app import create_app
from monitor.runtime.batches import event_batches
from monitor.runtime.layout import BrokerLayout
from monitor.runtime.tablestore import TableStore
from monitor.runtime.worker import run_worker


def build_floor_app(settings: Settings, layout: BrokerLayout | None = None) -> faust.App:
    """``layout``: only whether the broker is Tansu; the floor reads the input as it is (keyed by conversation id)."""
    app, topics = create_app(settings, tansu=layout is not None and layout.tansu)
    counted = TableStore(app.Table("scored", partitions=settings.topic_partitions))
    turns = TableStore(app.Table("turns", partitions=settings.topic_partitions))

    @app.agent(topics.events)
    async def hot_path(stream: faust.StreamT[Any]) -> None:
        """The hot path minus the work: batches of events, a changelog write per turn, one small record and
        one dedup write per finished conversation."""
        async for events in event_batches(stream, settings.event_batch, within=settings.classify_within_s):
            for event in events:
                obj = orjson.loads(event.value)
                cid, partition = obj["conversation_id"], event.message.partition
                if event_kind(obj) == "turn":
                    turns.put(f"{cid}:{obj['turn_index']}", obj["text"], partition)
                    continue
                counted.put(f"distilled:{cid}", 1, partition)
                await topics.scores.send(key=event.key, value=orjson.dumps({"scorer": "distilled",
                                                                           "conversation_id": cid}))
            await turns.flush()  # the batch's table writes to the producer, as the hot path does
            await counted.flush()

    return app


def main() -> None:
    run_worker(Settings(), build=build_floor_app)


if __name__ == "__main__":
    main()
