"""Do Kafka transactions work on the embedded Tansu broker? A probe, not a test (run it by hand):

    PYTHONPATH=. .venv/bin/python -m tests.reliability.tansu_txn_probe          # in-memory broker
    PYTHONPATH=. .venv/bin/python -m tests.reliability.tansu_txn_probe --s3     # S3 engine on moto

It drives aiokafka's transactional producer (what faust's ``processing_guarantee="exactly_once"`` uses, one
per assigned partition) and a ``read_committed`` consumer, and prints each step's result. aiokafka 0.14 sends
InitProducerId v0, which Tansu answers with error -1; with ``--v3`` the probe teaches aiokafka v3 (producer id
and epoch -1, the fields Tansu reads) to see how far the rest of the protocol goes. What it found is
in docs/reliability.md (delivery semantics).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.producer import sender
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.transaction import InitProducerIdRequest_v0
from aiokafka.protocol.types import CompactString, Int16, Int32, Int64, Schema, TaggedFields

from monitor.runtime.broker import EmbeddedBroker
from tests.support.s3_server import S3Server


class InitProducerIdResponseV3(Response):
    API_KEY = 22
    API_VERSION = 3
    FLEXIBLE_VERSION = True
    SCHEMA = Schema(("throttle_time_ms", Int32), ("error_code", Int16), ("producer_id", Int64),
                    ("producer_epoch", Int16), ("tags", TaggedFields))


class InitProducerIdRequestV3(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = 22
    API_VERSION = 3
    RESPONSE_TYPE = InitProducerIdResponseV3
    SCHEMA = Schema(("transactional_id", CompactString("utf-8")), ("transaction_timeout_ms", Int32),
                    ("producer_id", Int64), ("producer_epoch", Int16), ("tags", TaggedFields))


class InitProducerIdUpToV3(Request[InitProducerIdRequest_v0 | InitProducerIdRequestV3]):
    API_KEY = 22

    def __init__(self, transactional_id: str | None, transaction_timeout_ms: int) -> None:
        self.transactional_id, self.timeout_ms = transactional_id, transaction_timeout_ms

    def build(self, request_struct_class: Any) -> Any:
        if request_struct_class.API_VERSION == 3:
            return request_struct_class(self.transactional_id, self.timeout_ms, -1, -1, {})
        return request_struct_class(self.transactional_id, self.timeout_ms)


async def step(name: str, action: Awaitable[object]) -> bool:
    try:
        await action
    except Exception as exc:  # the point is to see what fails and how
        print(f"FAIL {name}: {type(exc).__name__}: {exc}")
        return False
    print(f"ok   {name}")
    return True


async def read(bootstrap: str, topic: str, isolation: str) -> tuple[list[str], int, int | None, int | None]:
    """Every value of partition 0, the end offset ListOffsets reports, the LSO and high watermark of a fetch."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                                isolation_level=isolation, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        values: list[str] = []
        while batch := await consumer.getmany(timeout_ms=1000):
            values += [r.value.decode() for records in batch.values() for r in records]
        end = (await consumer.end_offsets([tp]))[tp]
        return values, end, consumer.last_stable_offset(tp), consumer.highwater(tp)
    finally:
        await consumer.stop()


def producer(bootstrap: str, txn_id: str) -> AIOKafkaProducer:
    return AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, acks="all")


async def probe(bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic("out", 1, 1), NewTopic("in", 1, 1)])
    await admin.close()
    p = producer(bootstrap, "probe-1")
    if not await step("InitProducerId (transactional producer start)", p.start()):
        return

    async def txn(values: list[str], offset: int | None, commit: bool) -> None:
        await p.begin_transaction()
        for v in values:
            await p.send("out", v.encode())
        if offset is not None:
            await p.send_offsets_to_transaction({TopicPartition("in", 0): offset}, "probe-group")
        await (p.commit_transaction() if commit else p.abort_transaction())

    await step("txn: 2 records + offset in:0=3, commit", txn(["c0", "c1"], 3, True))
    await step("txn: 2 records + offset in:0=5, abort", txn(["a0", "a1"], 5, False))
    open_ = producer(bootstrap, "probe-open")
    await open_.start()
    await open_.begin_transaction()
    await open_.send_and_wait("out", b"open0")
    for isolation in ("read_uncommitted", "read_committed"):
        values, end, lso, hw = await read(bootstrap, "out", isolation)
        print(f"     {isolation}: {values} ListOffsets end={end} fetch LSO={lso} HW={hw}")
    group = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="probe-group", enable_auto_commit=False)
    await group.start()
    print(f"     committed offset in:0 = {await group.committed(TopicPartition('in', 0))} (3 expected)")
    await group.stop()
    crashed = producer(bootstrap, "probe-crash")
    await crashed.start()
    await crashed.begin_transaction()
    await crashed.send_and_wait("out", b"dangling")  # then the process dies: never committed nor aborted
    successor = producer(bootstrap, "probe-crash")
    await step("successor with the crashed producer's transactional id starts (must abort the dangling txn)",
               successor.start())
    await step("zombie commits after being fenced (must fail with ProducerFenced)", _zombie(p, bootstrap))
    values, *_ = await read(bootstrap, "out", "read_committed")
    print(f"     read_committed at the end: {values} (expected ['c0', 'c1'] and nothing aborted or dangling)")
    for client in (p, open_, crashed, successor):
        await client.stop()


async def _zombie(p: AIOKafkaProducer, bootstrap: str) -> None:
    await producer(bootstrap, "probe-1").start()  # same transactional id: fences p
    await p.begin_transaction()
    await p.send_and_wait("out", b"zombie")
    await p.commit_transaction()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--s3", action="store_true", help="Tansu's S3 engine on a local moto server")
    parser.add_argument("--v3", action="store_true", help="send InitProducerId v3 instead of aiokafka's v0")
    args = parser.parse_args()
    if args.v3:
        sender.InitProducerIdRequest = InitProducerIdUpToV3  # this process only
    workdir = Path(tempfile.mkdtemp(prefix="txn-probe-"))
    if args.s3:
        with S3Server(workdir / "s3.log") as s3:
            broker = s3.broker(log_path=workdir / "broker.log").start()
            try:
                asyncio.run(probe(broker.bootstrap))
            finally:
                broker.stop()
    else:
        with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
            asyncio.run(probe(broker.bootstrap))


if __name__ == "__main__":
    main()
