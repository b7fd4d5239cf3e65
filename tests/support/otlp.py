"""OTLP end to end: a worker reading OTLP input with evaluation events on, an OTLP/HTTP logs receiver, unkeyed
messages as the Collector's kafka exporter sends them."""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiokafka import AIOKafkaProducer
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import Settings
from monitor.judge.reference import ConversationRef
from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from tests.support.model_fixtures import publish_distilled_model

REFERENCE_KEY = "otlp-e2e-reference-key-0123456789"


REF = ConversationRef(REFERENCE_KEY.encode())  # evaluation events carry the id's reference, never the id


def unreferenced(reference: str, ids: Any) -> str:
    """The conversation id (one of ``ids``) whose reference an evaluation event carries."""
    found = {REF(cid): cid for cid in ids}
    assert reference in found, f"{reference!r} is not the reference of a known conversation id"
    return found[reference]


class OtlpReceiver:
    """An OTLP/HTTP logs endpoint: decodes every request with opentelemetry-proto and keeps the records."""

    def __init__(self) -> None:
        self.records: list[LogRecord] = []
        self.bodies: list[bytes] = []  # the requests as sent (resource attributes included), to grep
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportLogsServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    receiver.bodies.append(body)
                    receiver.records += [r for rl in request.resource_logs for sl in rl.scope_logs
                                         for r in sl.log_records]
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/logs"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def produce_unkeyed(bootstrap: str, topic: str, messages: list[bytes]) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=4 << 20)
        await producer.start()
        try:
            for raw in messages:
                await producer.send(topic, key=None, value=raw)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(run())


def otlp_worker(make_settings: Any, broker: str, input_format: str, encoding: str) -> tuple[Settings, RubricSet]:
    """Settings for a worker reading OTLP input and emitting distilled evaluation events, its model published and
    its topics created."""
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=0.0, idle_timeout_s=3.0, registry_poll_s=1.0,
                             input_format=input_format, otlp_encoding=encoding, otel_evaluation_events=True,
                             otel_evaluation_scorers=["distilled"], pii_reference_key=REFERENCE_KEY)
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    publish_distilled_model(settings, rubric)
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    return settings, rubric
