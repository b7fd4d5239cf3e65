"""Privacy end to end: one real broker, one real worker, the label/score store on SQLite and on the real
PostgreSQL (127.0.0.1:5432, database ``test``, a schema of its own); personal data planted in turn text,
producer metadata and conversation ids (e-mail addresses), default settings plus the score store.

For each kind of personal data the raw values must never appear where convmon writes: the bytes (keys,
values, headers) of every topic it writes (judge, labels, scores, dead letters, its changelogs; the input
topic is the producer's), every row of every table in the label store's database and the database's own bytes
(the SQLite file and its WAL; ``pg_dump`` of the schema), a /metrics scrape in both exposition formats
(labels and exemplars), the OTLP evaluation events as an OTLP/HTTP receiver gets them (the requests' bytes,
resource included), and the worker's log at INFO (``-v``). Then ``convmon forget`` with an exemplar's reference erases
the conversation from the database and reports the topics as JSON. The judge is
the project's OpenAI-compatible test server over real HTTP, asked for explanations (they quote the user).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest
import sqlalchemy as sa
from aiokafka import TopicPartition

from monitor.contracts.rubric_set import load_rubric_set
from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import by_label
from monitor.tools.openai_server import OpenAIServer
from monitor.tools.simulator.generate import ConversationGenerator
from tests.support.model_fixtures import publish_distilled_model
from tests.support.otlp import OtlpReceiver
from tests.support.topic_io import list_topics, produce, read_to_fetched_end, reader
from tests.support.workers import WorkerProcess, settings_env, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long]  # ~45 s: `make faults` runs it (CI too)

N = 12
TEXT = ("my email is dave.lee@example.net, call +44 20 7946 0958 or 415-555-0100, card 4111 1111 1111 1111, "
        "IBAN DE89 3704 0044 0532 0130 00, from 192.168.10.20 or 2001:db8::8a2e:370:7334, SSN 123-45-6789, "
        "NI AB 12 34 56 C, my name is Maria Schmidt and I live at 221B Baker Street; at home 020 7946 0958, "
        "in Paris 01 42 68 53 00, or write to john dot doe at example dot com")
PLANTED_TEXT = ["dave.lee@example.net", "7946 0958", "555-0100", "4111 1111 1111 1111", "DE89 3704", "192.168.10.20",
                "2001:db8::8a2e", "123-45-6789", "AB 12 34 56 C", "Maria Schmidt", "221B Baker", "42 68 53 00",
                "john dot doe"]
METADATA = {"app": "dave@example.net", "locale": "+1 415 555 0100", "model_version": "4111111111111111"}
PLANTED = PLANTED_TEXT + list(METADATA.values())
ID_DOMAIN = "@privacy.example.org"  # conversation ids are e-mail addresses: never in a metric, exemplar or log


def leaks(blob: bytes | str) -> list[str]:
    text = blob if isinstance(blob, str) else blob.decode("utf-8", "replace")
    return [value for value in PLANTED if value in text]


def read_all(bootstrap: str, topics: list[str]) -> dict[str, list[bytes]]:
    async def run() -> dict[str, list[bytes]]:
        consumer = reader(bootstrap)
        await consumer.start()
        try:
            await consumer._client.force_metadata_update()
            tps = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t) or ()]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            records, _ = await read_to_fetched_end(consumer, tps, timeout_s=60)
        finally:
            await consumer.stop()
        out: dict[str, list[bytes]] = {t: [] for t in topics}
        for r in records:
            out[r.topic].append(b" ".join([r.key or b"", r.value or b"", *(v for _, v in r.headers or ())]))
        return out

    return asyncio.run(run())


PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """The label store's URL and a function returning the database's bytes as stored (to grep)."""
    if request.param == "sqlite":
        path = tmp_path / "labels.db"
        yield f"sqlite:///{path}", lambda: b"".join(p.read_bytes() for p in tmp_path.glob("labels.db*"))
        return
    schema = f"privacy_{uuid.uuid4().hex[:8]}"  # other suites share the database: every table lands here
    engine = sa.create_engine(PG_URL)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))

    def pg_dump() -> bytes:
        return subprocess.run(["pg_dump", "--data-only", f"--schema={schema}", "-h", "127.0.0.1", "-U", "postgres",
                               "test"], capture_output=True, check=True, timeout=60).stdout

    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}", pg_dump
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        engine.dispose()


def test_no_planted_value_reaches_a_topic_table_metric_exemplar_or_log(
        broker: str, make_settings, tmp_path, database: tuple[str, Callable[[], bytes]]) -> None:
    url, stored_bytes = database
    server = OpenAIServer().start()  # the judge over real HTTP: every request body is kept
    settings = make_settings(broker_url=f"kafka://{broker}", label_store_url=url, sample_rate=1.0, idle_timeout_s=3.0,
                             registry_poll_s=1.0, score_store=True, max_event_bytes=200_000,
                             openai_base_url=server.url, openai_api_key="test", judge_explanations=True,
                             otel_evaluation_events=True)  # both scorers' verdicts out as OTLP log events
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    publish_distilled_model(settings, rubric)
    generator = ConversationGenerator(rubric, seed=32)
    records: list[tuple[bytes | None, bytes]] = []
    for i in range(N):
        cid = f"user{i}{ID_DOMAIN}"
        conversation = generator.generate(cid, 1.7e9 + i)
        for event in conversation.events:
            if event.get("type") == "turn" and event["turn_index"] == 0:
                event = {**event, "text": f"{event['text']} {TEXT}", "metadata": METADATA}
            records.append((cid.encode() if i % 2 else None, orjson.dumps(event)))  # half unkeyed: re-keyed
    bad = orjson.dumps({"conversation_id": "bad", "turn_index": 0, "role": "robot", "text": TEXT, "timestamp": 1})
    records.append((b"bad", bad))
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))

    receiver = OtlpReceiver()
    otel_env = {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": receiver.url, "OTEL_BLRP_SCHEDULE_DELAY": "200"}
    try:
        with WorkerProcess(settings, tmp_path / "worker.log", extra_env=otel_env, args=("-v",)) as worker:
            produce(broker, settings.topic("events"), records)

            def all_scored() -> bool:
                scored = by_label(worker.samples(), "convmon_conversations_scored_total", "scorer")
                return scored.get("distilled", 0) >= N and scored.get("llm", 0) >= N

            wait_until(all_scored, timeout=150, message="every conversation scored by both scorers")
            with sa.create_engine(settings.label_store_url).connect() as conn:
                wait_until(lambda: conn.execute(sa.text("SELECT count(*) FROM convmon_score_items")).scalar_one() > 0,
                           timeout=30, message="score items written")
            events = 2 * N * len(rubric.items)  # one per item of each conversation, from each scorer
            wait_until(lambda: len(receiver.records) >= events, timeout=30, message="evaluation events received")
            text = httpx.get(worker.url, timeout=5).text
            openmetrics = httpx.get(worker.url, headers={"Accept": "application/openmetrics-text; version=1.0.0"},
                                    timeout=5).text
            assert worker.alive(), worker.log()
    finally:
        server.stop()
        receiver.stop()
    log = (tmp_path / "worker.log").read_text(errors="replace")

    # the judge's request bodies (real HTTP): redacted text only, and the requests did carry the conversations
    bodies = [orjson.dumps(body) for body in server.requests]
    assert len(bodies) >= N and all(b"[EMAIL]" in b and b"[NATIONAL_ID]" in b for b in bodies)
    assert not [leaks(b) for b in bodies if leaks(b)]

    # /metrics: no planted value in a label, no conversation id in an exemplar; exemplars carry references
    assert not leaks(text) and not leaks(openmetrics) and ID_DOMAIN not in openmetrics
    refs = set(re.findall(r'conversation_ref="(ref-[0-9a-f]{20})"', openmetrics))
    assert refs, "verdict counters carry exemplars"
    assert 'app="other"' in text and "dave" not in text

    # every topic convmon writes (not the producer's input topic)
    ours = sorted(t for t in list_topics(broker)
                  if (t.startswith(settings.topic_prefix) and t != settings.topic("events"))
                  or t.startswith(settings.app_id))
    assert {settings.topic("judge"), settings.topic("labels"), settings.topic("scores")} <= set(ours)
    found = read_all(broker, ours)
    assert found[settings.topic("judge")] and found[settings.topic("scores")] and found[settings.topic("labels")]
    for topic, blobs in found.items():
        assert not [leaks(b) for b in blobs if leaks(b)], f"{topic} carries planted values"

    # every row of every table
    engine = sa.create_engine(settings.label_store_url)
    with engine.connect() as conn:
        tables = sa.inspect(conn).get_table_names()
        dump = " ".join(str(conn.execute(sa.text(f'SELECT * FROM "{t}"')).all()) for t in tables)
    assert "convmon_score_items" in tables and "convmon_labels" in tables and "[EMAIL]" in dump and not leaks(dump)
    raw = stored_bytes()  # the bytes as the database keeps them (file pages, WAL; the schema's dump)
    assert b"[EMAIL]" in raw and b"[NATIONAL_ID]" in raw and not leaks(raw), leaks(raw)

    # OTLP evaluation events: the requests' bytes (attributes, explanations, resource); references, not ids
    assert receiver.bodies and b"gen_ai.evaluation.explanation" in b"".join(receiver.bodies)
    assert not [leaks(b) for b in receiver.bodies if leaks(b)] and not any(ID_DOMAIN.encode() in b
                                                                             for b in receiver.bodies)

    # the worker's log
    assert not leaks(log) and ID_DOMAIN not in log

    # forget by an exemplar's reference: resolved through the score items, erased, topics reported
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env.update(settings_env(settings))
    env["PYTHONPATH"] = os.getcwd()
    ref = sorted(refs)[0]
    result = subprocess.run([sys.executable, "-m", "monitor.cli", "forget", ref], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = orjson.loads(result.stdout)
    [cid] = report["conversation_ids"]
    assert cid.endswith(ID_DOMAIN) and report["references"][cid] == ref and report["removed"]["score_items"] > 0
    assert settings.topic("judge") in {t.get("topic") for t in report["not_removed"]}
    with engine.connect() as conn:
        for table in ("convmon_labels", "convmon_score_items"):
            rows = conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE conversation_id = :c"), {"c": cid})
            assert rows.scalar_one() == 0
    engine.dispose()
