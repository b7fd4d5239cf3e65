"""`convmon topics create|check` against the embedded broker: what is created, what check reports."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from pydantic import ValidationError

from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.runtime.broker import free_port
from monitor.runtime.topics import check_topics, convmon_topics, create_topics
from monitor.runtime.worker import build_worker_app
from tests.workers import settings_env


def run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env.update(settings_env(settings), PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", "monitor.cli", "topics", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_the_changelogs_are_the_worker_apps_real_tables(make_settings) -> None:
    settings = make_settings()
    app = build_worker_app(settings)
    changelogs = {table.changelog_topic.get_topic_name() for table in app.tables.values()}
    specs = {s.name: s for s in convmon_topics(settings)}
    assert changelogs == {n for n in specs if n.endswith("-changelog")}
    assert all(specs[n].config == {"cleanup.policy": "compact"} for n in changelogs)
    assert {settings.topic(n) for n in ("events", "scores", "dead-letters")} <= specs.keys()


def test_retention_settings_are_validated() -> None:
    with pytest.raises(ValidationError, match="retention_events_s"):
        Settings(retention_events_s=0)
    with pytest.raises(ValidationError, match="topic_replication"):
        Settings(topic_replication=0)


@pytest.mark.integration
def test_create_then_check_is_clean_and_create_is_idempotent(broker: str, make_settings) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", topic_partitions=3, retention_events_s=3600)
    created = asyncio.run(create_topics(settings))
    assert sorted(created) == sorted(s.name for s in convmon_topics(settings))
    assert asyncio.run(check_topics(settings)) == []
    assert asyncio.run(create_topics(settings)) == []
    result = run_cli(settings, "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"all {len(convmon_topics(settings))} convmon topics" in result.stdout


@pytest.mark.integration
def test_check_reports_each_problem_on_one_line_and_fails(broker: str, make_settings) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", topic_partitions=4)
    events, changelog = settings.topic("events"), f"{settings.app_id}-sessions-changelog"

    async def sabotage() -> None:  # what an auto-creating broker or a hand-made topic leaves behind
        admin = AIOKafkaAdminClient(bootstrap_servers=broker)
        await admin.start()
        try:
            await admin.create_topics([
                NewTopic(events, 2, 1, topic_configs={"cleanup.policy": "delete", "retention.ms": "1000"}),
                NewTopic(changelog, 4, 1, topic_configs={"cleanup.policy": "delete"}),
            ])
        finally:
            await admin.close()

    asyncio.run(sabotage())
    result = run_cli(settings.model_copy(update={"topic_replication": 3}), "check")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    n_missing = len(convmon_topics(settings)) - 2
    assert sum(line.endswith("missing (run `convmon topics create`)") for line in lines) == n_missing
    assert f"{events}: 2 partitions, expected 4 (CONVMON_TOPIC_PARTITIONS)" in lines
    assert f"{events}: retention.ms=1000, expected 604800000 (CONVMON_RETENTION_EVENTS_S)" in lines
    assert f"{changelog}: cleanup.policy=delete, expected compact (faust table changelog)" in lines
    assert f"{events}: replication factor 1, expected 3 (CONVMON_TOPIC_REPLICATION)" in lines
    assert len(lines) == n_missing + 5  # and nothing else: the changelog's partitions are right

    result = run_cli(settings, "create")  # creates the missing ones, leaves the broken ones alone
    assert result.returncode == 0 and f"{n_missing} created, 2 already existed" in result.stdout
    assert len(asyncio.run(check_topics(settings))) == 3


def test_an_unreachable_broker_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    settings = Settings(broker_url=f"kafka://127.0.0.1:{free_port()}", data_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"^cannot reach Kafka at kafka://127\.0\.0\.1:\d+ \(CONVMON_BROKER_URL\)"):
        asyncio.run(check_topics(settings))
