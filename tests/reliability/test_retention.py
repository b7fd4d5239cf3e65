"""Retention and erasure: topic retention set where convmon creates topics; ``convmon forget`` erases and reports."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import orjson
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from distill.store import LabelStore
from monitor.runtime.retention import DAY_MS
from monitor.runtime.topics import create_topics
from tests.reliability.pg import label_message


def _retention(bootstrap: str, topics: list[str]) -> dict[str, str | None]:
    async def run() -> dict[str, str | None]:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            found: dict[str, str | None] = dict.fromkeys(topics)
            for response in await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics]):
                for resource in response.resources:
                    found[resource[3]] = next((c[1] for c in resource[4] if c[0] == "retention.ms"), None)
            return found
        finally:
            await admin.close()

    return asyncio.run(run())


def test_scores_and_dead_letters_are_created_with_their_retention(broker: str, make_settings) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", retention_scores_s=3 * 86400,
                             retention_dead_letters_s=43200, retention_events_s=3600)
    asyncio.run(create_topics(settings))
    found = _retention(broker, [settings.topic("scores"), settings.topic("dead-letters"), settings.topic("events")])
    assert found == {settings.topic("scores"): str(3 * DAY_MS), settings.topic("dead-letters"): str(DAY_MS // 2),
                     settings.topic("events"): str(3600 * 1000)}


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    return subprocess.run([sys.executable, "-m", "monitor.cli", *args], env={**clean, **env}, capture_output=True,
                          text=True, timeout=120)


def test_forget_erases_every_label_of_the_ids_and_names_the_topics_that_keep_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    store = LabelStore(url)
    store.upsert_raw([label_message(cid) for cid in ("c-1", "c-2", "c-3")])
    record = orjson.loads(orjson.dumps(label_message("c-1")))
    record["score"]["rubric_version"] = "2"  # a second label of c-1, under another rubric version
    store.upsert_raw([record])
    env = {"CONVMON_LABEL_STORE_URL": url, "CONVMON_TOPIC_PREFIX": "acme.", "PYTHONPATH": os.getcwd()}
    result = _cli(["forget", "c-1", "c-3"], env)
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stderr.split())  # rich wraps long lines
    assert "deleted 3 label rows for 2 conversation id(s)" in out
    assert "acme.scores: score records" in out and f"retention.ms={30 * DAY_MS}" in out
    assert "acme.events" in out and "cluster's default retention" in out
    assert "model registry: holds no per-conversation data" in out
    assert [r.conversation_id for r in store.fetch()] == ["c-2"]


def test_forget_errors_are_one_line() -> None:
    result = _cli(["forget", "c-1"], {"CONVMON_LABEL_STORE_URL": "mysql://u:pw@h/db", "PYTHONPATH": os.getcwd()})
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "supports sqlite and postgresql" in result.stderr
    assert "pw" not in result.stderr
    result = _cli(["forget", " "], {"PYTHONPATH": os.getcwd()})
    assert result.returncode == 2 and "at least one non-empty conversation id" in result.stderr
