"""`convmon topics create|check`: convmon's Kafka topics, for clusters where the app may not create them.

What exists is decided here once: the stage topics (``TOPIC_NAMES``) and the state changelog
(``<app_id>-state-changelog``, compacted, partitioned as the re-keyed topic: monitor/engine/changelog.py). Workers
create missing topics with the same specs at start; on clusters whose ACLs deny that, an administrator runs ``convmon
topics create`` once and the workers only read and write.

The input topic is listed only when it is convmon's default ``<prefix>events``: a topic named by
``CONVMON_INPUT_TOPIC`` is the producer's, never created, altered or checked here (its partition count
is read at start: monitor/runtime/layout.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import KafkaSettings
from monitor.runtime.clients import TOPIC_NAMES, aiokafka_kwargs, bootstrap, broker_unreachable

STATE_CHANGELOG = "state"  # the engine's changelog (monitor/engine/changelog.py)
RETENTION_SETTING = {"events": "retention_events_s", "rekeyed": "retention_events_s",
                     "scores": "retention_scores_s", "dead-letters": "retention_dead_letters_s"}


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication: int
    config: dict[str, str] = field(default_factory=dict)
    why: str = ""  # the setting or rule the spec comes from, for check's messages


def convmon_topics(kafka: KafkaSettings) -> list[TopicSpec]:
    """Every topic a convmon deployment uses, with the partitions, replication and configs it needs."""
    n, rf = kafka.topic_partitions, kafka.topic_replication
    specs = []
    for name in ("events", *TOPIC_NAMES) if kafka.owns_input_topic else TOPIC_NAMES:
        config = {"cleanup.policy": "delete"}
        if name in RETENTION_SETTING:
            seconds = getattr(kafka, RETENTION_SETTING[name])
            config["retention.ms"] = str(int(seconds * 1000))
        specs.append(TopicSpec(kafka.topic(name), n, rf, config, RETENTION_SETTING.get(name, "")))
    # compacted, and partitioned exactly as the state
    specs.append(TopicSpec(f"{kafka.app_id}-{STATE_CHANGELOG}-changelog", n, rf, {"cleanup.policy": "compact"},
                           "state changelog"))
    return specs


class Admin:
    """An aiokafka admin client that turns an unreachable or refusing broker into one ConfigError line."""

    def __init__(self, kafka: KafkaSettings) -> None:
        self.kafka = kafka
        self.client = AIOKafkaAdminClient(bootstrap_servers=bootstrap(kafka), **aiokafka_kwargs(kafka))

    async def __aenter__(self) -> AIOKafkaAdminClient:
        try:
            await self.client.start()
        except KafkaError as exc:
            await self.client.close()
            raise broker_unreachable(self.kafka, exc) from exc
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()


async def create_topics(kafka: KafkaSettings) -> list[str]:
    """Create the missing topics; returns their names. Existing topics are left as they are."""
    specs = convmon_topics(kafka)
    async with Admin(kafka) as admin:
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        if missing:
            new = [NewTopic(s.name, s.partitions, s.replication, topic_configs=s.config) for s in missing]
            try:
                response = await admin.create_topics(new)
            except KafkaError as exc:
                raise ConfigError(f"creating topics on {kafka.broker_url} failed: {exc!r}") from exc
            # a topic another worker created meanwhile is fine; anything else (e.g. no CREATE ACL) is not
            errors = [f"{topic}: {message or for_code(code).__name__}" for topic, code, message in response.topic_errors
                      if code not in (0, TopicAlreadyExistsError.errno)]
            if errors:
                raise ConfigError(f"creating topics on {kafka.broker_url} failed: " + "; ".join(errors))
    return [s.name for s in missing]


async def check_topics(kafka: KafkaSettings) -> list[str]:
    """One line per missing or misconfigured topic; empty when everything matches."""
    specs = convmon_topics(kafka)
    problems = []
    async with Admin(kafka) as admin:
        existing = set(await admin.list_topics())
        present = [s for s in specs if s.name in existing]
        problems += [f"{s.name}: missing (run `convmon topics create`)" for s in specs if s.name not in existing]
        if not present:
            return problems
        described = {t["topic"]: t for t in await admin.describe_topics([s.name for s in present])}
        resources = [ConfigResource(ConfigResourceType.TOPIC, s.name) for s in present]
        configs: dict[str, dict[str, str]] = {}
        for response in await admin.describe_configs(resources):
            for _code, _msg, _type, name, entries in response.resources:
                configs[name] = {entry[0]: entry[1] for entry in entries}
    for spec in present:
        problems += topic_problems(spec, described[spec.name], configs.get(spec.name, {}))
    return problems


def topic_problems(spec: TopicSpec, described: dict[str, Any], config: dict[str, str]) -> list[str]:
    """Fewer replicas than configured is a problem; more is not (a cluster policy may raise them)."""
    out = []
    partitions = described["partitions"]
    if len(partitions) != spec.partitions:
        source = spec.why if spec.name.endswith("__leader") else "CONVMON_TOPIC_PARTITIONS"
        out.append(f"{spec.name}: {len(partitions)} partitions, expected {spec.partitions} ({source})")
    replication = min((len(p["replicas"]) for p in partitions), default=0)
    if replication < spec.replication:
        out.append(f"{spec.name}: replication factor {replication}, expected {spec.replication} "
                   "(CONVMON_TOPIC_REPLICATION)")
    for key, want in spec.config.items():
        have = config.get(key)
        if key == "cleanup.policy":
            ok = have is not None and set(have.split(",")) == set(want.split(","))
        else:
            ok = have == want
        if not ok:
            source = f"CONVMON_{spec.why.upper()}" if spec.why.startswith("retention") else spec.why or "convmon"
            out.append(f"{spec.name}: {key}={have}, expected {want} ({source})")
    return out
