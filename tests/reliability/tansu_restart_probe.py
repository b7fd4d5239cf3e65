"""What offsets does a Tansu S3 log hold after a broker kill -9 during produce? A probe, not a test (run by hand):

    PYTHONPATH=. .venv/bin/python -m tests.reliability.tansu_restart_probe [SECONDS_BEFORE_THE_KILL]

It produces 3,000 records (acks=all) to 2 partitions, kills the broker while they go out, restarts it on the
same S3 bucket (moto) and reads every partition from the beginning: it prints each partition's end offset (high
watermark), the records read, and where the offsets are not contiguous. Results: the watermark came back
behind the records stored, and in one of two runs 30 offsets held no record; runtime/seeks.py counts such
offsets as empty, not skipped.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from monitor.runtime.broker import ensure_topics
from tests.support.s3_server import S3Server

TOPIC, PARTITIONS, RECORDS = "holes", 2, 3000


async def produce(bootstrap: str) -> list[object]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=30000)
    await producer.start()
    try:
        futures = []
        for i in range(RECORDS):
            futures.append(await producer.send(TOPIC, key=b"k%d" % (i % 4), value=b"v%d" % i))
            if i % 20 == 0:
                await asyncio.sleep(0.02)  # spread the sends over the kill
        return await asyncio.gather(*futures, return_exceptions=True)
    finally:
        await producer.stop()


async def read_all(bootstrap: str) -> tuple[dict[int, int], dict[int, list[int]]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        offsets: dict[int, list[int]] = {tp.partition: [] for tp in tps}
        deadline = time.monotonic() + 30
        idle = 0
        while time.monotonic() < deadline and idle < 3:  # read past the end offsets too: records may lie there
            fetched = await consumer.getmany(timeout_ms=1000)
            idle = 0 if fetched else idle + 1
            for tp, records in fetched.items():
                offsets[tp.partition] += [r.offset for r in records]
        return {tp.partition: ends[tp] for tp in tps}, offsets
    finally:
        await consumer.stop()


def main(kill_after_s: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tansu-restart-"))
    with S3Server(tmp / "s3.log") as s3:
        broker = s3.broker(log_path=tmp / "broker.log").start()
        try:
            asyncio.run(ensure_topics(broker.bootstrap, [TOPIC], PARTITIONS))
            result: dict[str, list[object]] = {}
            sender = threading.Thread(target=lambda: result.setdefault("acks", asyncio.run(produce(broker.bootstrap))))
            sender.start()
            time.sleep(kill_after_s)
            broker.kill()
            time.sleep(2)
            broker.start()
            sender.join()
            errors = [r for r in result["acks"] if isinstance(r, Exception)]
            print(f"produced {RECORDS}, {len(errors)} not acknowledged")
            ends, offsets = asyncio.run(read_all(broker.bootstrap))
            for partition, read in offsets.items():
                repeated = sum(1 for n in Counter(read).values() if n > 1)
                jumps = [(a, b) for a, b in zip(read, read[1:], strict=False) if b != a + 1]
                print(f"partition {partition}: end offset {ends[partition]}, {len(read)} records read "
                      f"({repeated} offsets read twice), offsets not contiguous at {jumps[:10]}")
        finally:
            broker.stop()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.5)
