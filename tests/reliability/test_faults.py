"""Fault injection on the real broker and real worker processes: crash, broker restart, judge outage,
label-store outage. What each test asserts is spelled out in its docstring and in docs/reliability.md."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from monitor.contracts.rubric_set import load_rubric_set
from monitor.engine.changelog import FENCE, STORES
from monitor.engine.worker import changelog_topic
from monitor.runtime.broker import EmbeddedBroker, ensure_topics, free_port
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import by_label, total
from monitor.tools.openai_server import OpenAIServer
from tests.reliability.fault_run import ARTIFACTS
from tests.support.model_fixtures import publish_distilled_model
from tests.support.topic_io import list_topics
from tests.support.traffic import Samples, conversations, no_crash, produce, read_topic, scored
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration


# --- helpers --------------------------------------------------------------------------------------


def dedup_marks(bootstrap: str, changelog: str) -> tuple[dict[str, list[float]], list[str]]:
    """The live dedup marks of the state changelog's counts store (not its totals, ledger or sessions), and the keys
    written again with another mark while live (counted twice). A mark of a batch whose offsets never committed is
    skipped by the next owner's restore and rewritten as a deletion before it counts the re-read input again: that
    is one count; a restore's rewrite of a committed mark repeats its value."""
    live: dict[str, list[float]] = {}
    counted_twice = []
    for record in read_topic(bootstrap, changelog):
        if record.key.startswith(FENCE) or not record.key.startswith(STORES[1]):
            continue
        key = record.key[len(STORES[1]):].decode()
        if key.startswith("#"):  # totals, commit records, the revision ledger
            continue
        value = orjson.loads(record.value) if record.value else None
        if value is not None and key in live and live[key] != value:
            counted_twice.append(key)
        if value is not None:
            live[key] = value
        else:
            live.pop(key, None)
    return live, counted_twice


# --- 1. kill -9 mid-stream ------------------------------------------------------------------------

def test_kill_9_mid_stream_then_restart_scores_everything_and_counts_nothing_twice(
    broker: str, make_settings, tmp_path: Path
) -> None:
    """SIGKILL a worker while events are still arriving, restart it (same consumer group).

    Let A_last be the killed worker's last scrape before the kill and B the restarted worker's
    final scrape; the dedup marks in the state changelog (value: [time counted, partition, batch])
    tell which lifetime counted each (scorer, conversation). Asserted per scorer:
    1. at least once: every conversation has a score record on the scores topic, and a dedup entry;
    2. never counted twice: each dedup key was written once (a second write means a second count);
    3. B counted exactly the keys it persisted (B == changelog entries stamped after the kill), and
       everything A had exported by its last scrape was persisted (A_last <= entries before the kill),
       so A_last + B <= N: the exported totals over both lifetimes never exceed the conversations.
    """
    n = 40
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=3.0,
                             registry_poll_s=1.0)
    publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    convs = conversations(settings, "crash", n, seed=11)
    ids = {c.conversation_id for c in convs}

    a = WorkerProcess(settings, tmp_path / "a.log").start()
    produce(settings, convs[:10])  # warm up: the worker has joined its group and scores
    wait_until(lambda: scored(a.samples()).get("llm", 0) >= 10, 60, message="warm-up batch scored")
    feeder = threading.Thread(target=produce, args=(settings, convs[10:], 0.1))
    feeder.start()
    try:
        a_last: Samples = []

        def part_scored() -> bool:
            nonlocal a_last
            a_last = a.samples()
            return scored(a_last).get("distilled", 0) >= 16

        wait_until(part_scored, timeout=60, interval=0.1, message="part of the stream scored before the kill")
        t_kill = time.time()
        a.kill()
    finally:
        feeder.join()
    assert scored(a_last).get("distilled", 0) < n, "the kill came too late to be mid-stream"

    changelog = changelog_topic(settings.app_id)
    with WorkerProcess(settings, tmp_path / "b.log") as b:
        def all_counted() -> bool:
            return len(dedup_marks(broker, changelog)[0]) >= 2 * n

        # a worker's restart alone takes 30-60 s at load 7 on 2 cores (90 s timed out once there)
        wait_until(all_counted, timeout=180, interval=1.0, message="every (scorer, conversation) counted")
        time.sleep(2)  # anything extra (a second count) would arrive now
        final = b.samples()
        assert b.alive()
        no_crash(b)

    live, counted_twice = dedup_marks(broker, changelog)
    entries = list(live.items())
    writes = Counter(key for key, _ in entries)
    assert counted_twice == [], "a conversation was counted twice"
    assert set(writes) == {f"{s}:{cid}" for s in ("llm", "distilled") for cid in ids}
    assert [k for k, c in writes.items() if c > 1] == [], "a conversation was counted twice"
    on_topic = {(r.value and orjson.loads(r.value)["scorer"], r.key.decode())
                for r in read_topic(broker, settings.topic("scores"))}
    for scorer in ("llm", "distilled"):
        assert {cid for s, cid in on_topic if s == scorer} == ids
        before = sum(1 for key, mark in entries if key.startswith(scorer) and mark[0] < t_kill)
        after = sum(1 for key, mark in entries if key.startswith(scorer) and mark[0] >= t_kill)
        assert scored(final).get(scorer, 0) == after
        assert scored(a_last).get(scorer, 0) <= before
        assert scored(a_last).get(scorer, 0) + scored(final).get(scorer, 0) <= n


MARKER_TOPIC = "restart-marker"  # a topic only the broker-restart test creates


# --- 2. broker restart ----------------------------------------------------------------------------

@pytest.mark.long  # 35-140 s: `make faults` runs it, so `make test` stays under 15 minutes
def test_broker_restart_workers_reconnect_recreate_topics_and_resume(make_settings, tmp_path: Path) -> None:
    """Restart the memory-only broker on the same port: every topic (and committed offset) is gone.

    The worker must stay up, recreate its topics (with its partition count) by itself, commit
    offsets again, and score every conversation produced after the restart exactly once. A commit the restarted
    broker refuses (it lost the group) drops the worker's state until the group assigns it partitions again.
    """
    port = free_port()
    own = EmbeddedBroker(port=port, log_path=tmp_path / "broker.log").start()
    try:
        settings = make_settings(broker_url=own.url, sample_rate=1.0, idle_timeout_s=3.0, registry_poll_s=1.0)
        publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
        expected_topics = {*topic_names(settings), changelog_topic(settings.app_id)}
        with WorkerProcess(settings, tmp_path / "worker.log") as worker:
            produce(settings, conversations(settings, "before", 10, seed=1))
            wait_until(lambda: scored(worker.samples()) == {"llm": 10, "distilled": 10}, 60, message="batch 1 scored")
            # A topic no worker uses shows the restart lost everything: the worker's own topics can be back
            # before the restarted broker answers the listing (its producer and the topic timer recreate them).
            asyncio.run(ensure_topics(own.bootstrap, [MARKER_TOPIC], 1))
            assert MARKER_TOPIC in list_topics(own.bootstrap)

            own.kill()
            time.sleep(2)
            own = EmbeddedBroker(port=port, log_path=tmp_path / "broker.log").start()
            restarted = time.monotonic()
            assert MARKER_TOPIC not in list_topics(own.bootstrap)  # memory-only: everything is gone

            wait_until(lambda: expected_topics <= list_topics(own.bootstrap), 60, interval=1.0,
                       message="the worker recreated its topics")
            recreated_s = time.monotonic() - restarted
            produce(settings, conversations(settings, "after", 10, seed=2))
            wait_until(lambda: scored(worker.samples()) == {"llm": 20, "distilled": 20}, 90,
                       message="batch 2 scored after the broker restart")
            # kept for repeated runs (tests/reliability/repeat_faults.py): the worker resumes within 60 s
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            (ARTIFACTS / "dev_broker_restart.json").write_text(json.dumps({
                "fault": "dev_broker_restart", "topics_recreated_s": round(recreated_s, 1),
                "all_scored_s": round(time.monotonic() - restarted, 1),
                "commits_refused": total(worker.samples(), "convmon_offset_commits_refused_total")}))
            time.sleep(2)
            samples = worker.samples()
            commit_failures = worker.log_path.read_text(errors="replace").count("OffsetCommit failed")
            time.sleep(8)  # several commit intervals: none may fail any more
            assert worker.log_path.read_text(errors="replace").count("OffsetCommit failed") == commit_failures
            assert worker.alive(), worker.log()
        assert scored(samples) == {"llm": 20, "distilled": 20}
        assert total(samples, "convmon_duplicate_scores_total") == 0
        for topic in expected_topics - {settings.topic("events")}:
            assert len(asyncio.run(_partitions(own.bootstrap, topic))) == settings.topic_partitions, topic
    finally:
        own.stop()


async def _partitions(bootstrap: str, topic: str) -> set[int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()
        return consumer.partitions_for_topic(topic) or set()
    finally:
        await consumer.stop()


# --- 3. judge outage ------------------------------------------------------------------------------

@pytest.mark.long  # `make faults` runs it, so `make test` stays under 15 minutes
def test_judge_outage_backpressure_retries_and_dead_letters_only_after_the_retry_budget(
    broker: str, make_settings, tmp_path: Path
) -> None:
    """After a warm-up conversation, the judge endpoint answers 500 for 4 s, then hangs past the
    client timeout for 4 s, then recovers; three "doomed" conversations get 500 for ever.

    Asserted: the distilled path scores every conversation while the judge is still down; while
    down, the judge pulls no more conversations than its concurrency (the rest wait in Kafka);
    every other conversation is judged once it recovers (retried through both 5xx and timeouts);
    each doomed conversation is dead-lettered (original bytes, reason judge_unavailable) after
    exactly judge_max_retries + 1 attempts; llm scores + dead letters = conversations.
    """
    n, doomed, concurrency, retries = 16, 3, 3, 11
    with OpenAIServer(slow_s=3.0) as server:
        settings = make_settings(
            broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=3.0, registry_poll_s=1.0,
            openai_base_url=server.url, openai_api_key="sk-test", judge_concurrency=concurrency,
            judge_max_retries=retries, judge_timeout_s=1.0, judge_backoff_base_s=0.5, judge_backoff_max_s=2.0,
            # no provider limits: the defaults (200,000 tokens a minute, each attempt charged its prompt's bytes, a
            # 5xx never credited back) spaced the doomed retries 5.5 s apart, 230-260 s of a 300 s timeout
            judge_requests_per_minute=1e6, judge_tokens_per_minute=1e9,
        )
        publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
        warm, *convs = conversations(settings, "outage", n + 1, seed=5)
        for i, conv in enumerate(convs):  # a reference in the first user turn identifies each request
            first = next(e for e in conv.events if e.get("role") == "user")
            first["text"] = f"{first['text']} [ref-{i}{'-doomed' if i < doomed else ''}]"

        def recovered(body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
            if "-doomed]" in json.dumps(body):
                return 500, {"error": {"message": "scripted 500", "type": "test_error"}}, {}
            return 200, server._completion(body, "good"), {}

        server.default = recovered
        with WorkerProcess(settings, tmp_path / "worker.log") as worker:
            produce(settings, [warm])  # the worker has joined its group and judges
            wait_until(lambda: scored(worker.samples()) == {"llm": 1, "distilled": 1}, 60, message="warm-up scored")
            server.default = "500"
            t0, first_request = time.monotonic(), len(server.requests)
            produce(settings, convs)
            wait_until(lambda: scored(worker.samples()).get("distilled", 0) >= n + 1, 10,
                       message="distilled scores while the judge is down")
            while time.monotonic() - t0 < 4:
                time.sleep(0.1)
            server.default = "slow"
            while time.monotonic() - t0 < 8:
                time.sleep(0.1)
            during = scored(worker.samples())
            seen_during = {_ref(body) for body in server.requests[first_request:]}
            server.default = recovered
            wait_until(lambda: total(worker.samples(), "convmon_dead_letters_total") >= doomed
                       and scored(worker.samples()).get("llm", 0) >= n - doomed + 1, 240,
                       message="every conversation judged or dead-lettered")
            time.sleep(2)
            samples = worker.samples()
            assert worker.alive(), worker.log()

    assert during == {"llm": 1, "distilled": n + 1}
    assert len(seen_during) <= concurrency, f"the judge pulled {seen_during} while down"
    retried = by_label(samples, "convmon_judge_retries_total", "cause")
    assert retried.get("5xx", 0) > 0 and retried.get("timeout", 0) > 0
    assert scored(samples) == {"llm": n - doomed + 1, "distilled": n + 1}
    assert by_label(samples, "convmon_dead_letters_total", "reason") == {"judge_unavailable": doomed}
    attempts = Counter(_ref(body) for body in server.requests[first_request:])
    for i in range(doomed):
        assert attempts[f"{i}-doomed"] == retries + 1
    assert all(1 <= attempts[str(i)] <= retries + 1 for i in range(doomed, n))
    letters = read_topic(broker, settings.topic("dead-letters"))
    dead_ids = sorted(orjson.loads(r.value)["conversation_id"] for r in letters)
    assert dead_ids == [f"outage-{i}" for i in range(1, doomed + 1)]
    assert all(dict(r.headers)["convmon-stage"] == b"judge" for r in letters)


def _ref(body: dict[str, Any]) -> str | None:
    text = json.dumps(body)
    start = text.find("[ref-")
    return text[start + 5:text.find("]", start)] if start >= 0 else None


# --- 4. label store outage ------------------------------------------------------------------------

def test_label_store_outage_buffers_alerts_and_writes_every_label_once_back(
    broker: str, make_settings, tmp_path: Path
) -> None:
    """Another process holds an exclusive lock on the SQLite label store (writes fail with
    "database is locked") while conversations are judged, then lets go; no traffic after that.

    Asserted: the worker stays up and keeps exporting scores (retraining is `convmon retrain`'s,
    tested against a failing store in tests/runtime/test_retrainer.py); convmon_label_store_errors_total
    rises and convmon_label_store_buffered shows the batch waiting unacknowledged (the rest wait in
    Kafka: consumer lag) — the alertable signals;
    once the lock is released every label is written, the buffer drains to 0, without new traffic;
    the failed writes' log lines do not quote conversation text (SQL parameters).
    """
    n = 8
    db = tmp_path / "labels.db"
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=3.0,
                             label_store_url=f"sqlite:///{db}", registry_poll_s=1.0)
    publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        wait_until(db.exists, 30, message="the label store file")
        lock = sqlite3.connect(db, timeout=30, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        try:
            convs = conversations(settings, "store", n, seed=9)
            for conv in convs:  # user text must not reach the logs through the store's error messages
                next(e for e in conv.events if e.get("role") == "user")["text"] += " zqxjkv-usertext"
            produce(settings, convs)
            wait_until(lambda: scored(worker.samples()) == {"llm": n, "distilled": n}, 60,
                       message="scores exported during the store outage")
            wait_until(lambda: total(worker.samples(), "convmon_label_store_buffered") >= 1
                       and total(worker.samples(), "convmon_label_store_errors_total") >= 1, 60,
                       message="labels waiting (unacknowledged) and errors counted")
            assert worker.alive()
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        expected = sorted(f"store-{i}" for i in range(n))

        def stored() -> list[str]:
            with sqlite3.connect(db) as conn:
                tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
                label_table = next(t for t in tables if t.endswith("labels"))
                return sorted(r[0] for r in conn.execute(f"select conversation_id from {label_table}"))  # noqa: S608

        # the buffer holds the batch being retried; the labels after it wait in Kafka until it is written
        wait_until(lambda: stored() == expected and total(worker.samples(), "convmon_label_store_buffered") == 0,
                   60, message="every label written and the buffer drained without new traffic")
        assert worker.alive()
        no_crash(worker)
    assert "zqxjkv-usertext" not in worker.log_path.read_text(errors="replace")


@pytest.mark.long  # 35-140 s: `make faults` runs it, so `make test` stays under 15 minutes
def test_worker_starts_and_runs_while_the_postgresql_label_store_is_unreachable(
    broker: str, make_settings, tmp_path: Path
) -> None:
    """The label store's database is down when the worker starts (nothing listens on its port).

    An always-on monitor must not depend on it to start: the worker comes up, scores and exports,
    buffers the labels and counts the failed writes; the database password never reaches a log.
    """
    password = "pg-LEAKCHECK-pw-91aa"
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=3.0,
                             registry_poll_s=1.0,
                             label_store_url=f"postgresql+psycopg://convmon:{password}@127.0.0.1:{free_port()}/labels")
    publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        produce(settings, conversations(settings, "pgdown", 4, seed=4))
        wait_until(lambda: scored(worker.samples()) == {"llm": 4, "distilled": 4}, 60, message="scores exported")
        wait_until(lambda: total(worker.samples(), "convmon_label_store_buffered") >= 1
                   and total(worker.samples(), "convmon_label_store_errors_total") >= 1, 30,
                   message="labels waiting, errors counted")
        assert worker.alive()
    assert password not in worker.log_path.read_text(errors="replace")
