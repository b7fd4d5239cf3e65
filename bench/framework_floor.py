"""The monitor's topology with the work taken out: what faust itself costs per conversation.

``bench throughput`` compares the monitor with a bare aiokafka consumer. The gap has two parts: our
work (validate, sessionize, featurize, predict, export) and the stream framework's (faust agents
reading Kafka topics, with changelogged tables, as docs/architecture.md draws them). This app keeps
the second and drops the first: the same app settings and the same shape (the hot path's batches of
each fetch's records, runtime/hotbatches.py; on turn input one changelog write per turn, the least a
restartable session store can write; one record on scores and one dedup table write per finished
conversation), with no work in between. Its rate is the ceiling of any monitor built this way, measured
in the same run as the raw consumer.

Run it as a worker process: ``python -m bench.framework_floor`` with ``CONVMON_*`` settings.
"""

from __future__ import annotations

import faust
import orjson
from faust.types import Message

from monitor.contracts.events import event_kind
from monitor.contracts.settings import Settings
from monitor.runtime.app import create_app
from monitor.runtime.layout import BrokerLayout
from monitor.runtime.tablestore import TableStore
from monitor.runtime.worker import run_worker


def build_floor_app(settings: Settings, layout: BrokerLayout | None = None) -> faust.App:
    """``layout``: only whether the broker is Tansu; the floor reads the input as it is (keyed by conversation id)."""
    app, topics = create_app(settings, tansu=layout is not None and layout.tansu)
    counted = TableStore(app.Table("scored", partitions=settings.topic_partitions))
    turns = TableStore(app.Table("turns", partitions=settings.topic_partitions))

    async def handle(messages: list[Message]) -> None:
        """The hot path minus the work: a changelog write per turn, one small record and one dedup write per
        finished conversation."""
        for message in messages:
            obj = orjson.loads(message.value or b"")
            cid, partition = obj["conversation_id"], message.partition
            if event_kind(obj) == "turn":
                turns.put(f"{cid}:{obj['turn_index']}", obj["text"], partition)
                continue
            counted.put(f"distilled:{cid}", 1, partition)
            await topics.scores.send(key=message.key, value=orjson.dumps({"scorer": "distilled",
                                                                         "conversation_id": cid}))
        await turns.flush()  # the batch's table writes to the producer, as the hot path does
        await counted.flush()

    app.topics.add(topics.hot)

    @app.task
    async def hot_path() -> None:
        assert app.hot_batches is not None
        await app.hot_batches.run(handle, settings.event_batch, within=settings.classify_within_s)

    return app


def main() -> None:
    run_worker(Settings(), build=build_floor_app)


if __name__ == "__main__":
    main()
