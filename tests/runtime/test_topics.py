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
from monitor.contracts.settings import REPO_ROOT, Settings, load_settings
from monitor.runtime.broker import ensure_topics, free_port
from monitor.runtime.clients import topic_names
from monitor.runtime.layout import BrokerLayout, read_layout
from monitor.runtime.topics import check_topics, convmon_topics, create_topics
from tests.support.workers import settings_env


def run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env.update(settings_env(settings), PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", "monitor.cli", "topics", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_the_changelog_is_the_engines_and_compacted(make_settings) -> None:
    from monitor.engine.worker import changelog_topic

    settings = make_settings()
    specs = {s.name: s for s in convmon_topics(settings)}
    assert {n for n in specs if n.endswith("-changelog")} == {changelog_topic(settings.app_id)}
    assert specs[changelog_topic(settings.app_id)].config == {"cleanup.policy": "compact"}
    assert specs[changelog_topic(settings.app_id)].partitions == settings.topic_partitions
    assert {settings.topic(n) for n in ("events", "rekeyed", "judge", "verdicts", "scores", "labels",
                                        "dead-letters")} == specs.keys() - {changelog_topic(settings.app_id)}


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
    events, changelog = settings.topic("events"), f"{settings.app_id}-state-changelog"

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
    assert f"{changelog}: cleanup.policy=delete, expected compact (state changelog)" in lines
    assert f"{events}: replication factor 1, expected 3 (CONVMON_TOPIC_REPLICATION)" in lines
    assert len(lines) == n_missing + 5  # and nothing else: the changelog's partitions are right

    result = run_cli(settings, "create")  # creates the missing ones, leaves the broken ones alone
    assert result.returncode == 0 and f"{n_missing} created, 2 already existed" in result.stdout
    assert len(asyncio.run(check_topics(settings))) == 3


def test_an_unreachable_broker_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    settings = Settings(broker_url=f"kafka://127.0.0.1:{free_port()}", data_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"^cannot reach Kafka at kafka://127\.0\.0\.1:\d+ \(CONVMON_BROKER_URL\)"):
        asyncio.run(check_topics(settings))


@pytest.mark.parametrize("name", ["", ".", "..", "otlp spans", "a/b", "x" * 250, "événements"])
def test_the_input_topic_must_be_a_kafka_topic_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    name: str) -> None:
    monkeypatch.chdir(tmp_path)  # no convmon.toml
    monkeypatch.setenv("CONVMON_INPUT_TOPIC", name)
    with pytest.raises(ConfigError, match=r"^setting 'input_topic' \(CONVMON_INPUT_TOPIC or convmon.toml\): "
                                          r"Value error, .* is not a Kafka topic name: 1-249 characters"):
        load_settings()


@pytest.mark.parametrize("name", ["convmon.dead-letters", "convmon.rekeyed", "convmon.scores",
                                  "convmon-state-changelog"])
def test_the_input_topic_cannot_be_one_of_convmons_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      name: str) -> None:
    """Reading its own dead letters would loop: each bad record dead-lettered into the topic being read."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONVMON_INPUT_TOPIC", name)
    with pytest.raises(ConfigError, match="is one of convmon's own topics"):
        load_settings()


def test_the_input_topic_is_convmons_events_unless_named_and_only_then_created(make_settings) -> None:
    default = make_settings()
    assert default.input_topic_name == default.topic("events") and default.owns_input_topic
    names = {s.name for s in convmon_topics(default)}
    assert {default.topic("events"), default.topic("rekeyed")} <= names
    assert topic_names(default)[0] == default.topic("events")

    named = make_settings(input_topic="otlp_spans", topic_partitions=4)
    assert named.input_topic_name == "otlp_spans" and not named.owns_input_topic
    specs = {s.name: s for s in convmon_topics(named)}
    assert "otlp_spans" not in specs and named.topic("events") not in specs  # the producer's: never created
    assert "otlp_spans" not in topic_names(named) and named.topic("rekeyed") in topic_names(named)
    rekeyed = specs[named.topic("rekeyed")]
    assert rekeyed.partitions == 4 and rekeyed.config["retention.ms"] == str(7 * 86400 * 1000)
    # naming convmon's own default explicitly is the default
    assert make_settings(input_topic="x.events", topic_prefix="x.").owns_input_topic


def test_the_layout_forwards_the_input_only_when_its_partitions_differ(make_settings) -> None:
    settings = make_settings(topic_partitions=4)
    assert not BrokerLayout.matching(settings).forward
    assert BrokerLayout("in", 1, 4).forward and BrokerLayout("in", 12, 4).forward
    assert not BrokerLayout("in", 4, 4).forward


@pytest.mark.integration
def test_the_input_layout_is_read_from_the_broker_and_a_missing_input_is_one_line(broker: str,
                                                                                 make_settings) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", topic_partitions=4)
    named = settings.model_copy(update={"input_topic": f"{settings.topic_prefix}collector"})
    with pytest.raises(ConfigError, match=r"^the input topic '.*collector' \(CONVMON_INPUT_TOPIC\) does not exist on "
                                          r"kafka://.*: create it \(its producer owns it; convmon only reads it\)"):
        asyncio.run(read_layout(named))
    asyncio.run(ensure_topics(broker, [named.input_topic_name], 3))
    assert asyncio.run(create_topics(named)) and named.input_topic_name not in asyncio.run(create_topics(named))
    assert asyncio.run(read_layout(named)) == BrokerLayout(named.input_topic_name, 3, 4, tansu=True)
    assert asyncio.run(check_topics(named)) == []  # the input's 3 partitions are not convmon's to check
