"""What a worker reads from the broker once at start: the input topic's partition count against convmon's
own, and whether the broker is Tansu (the embedded one), and what follows from each.

The hot path keeps its state (open sessions, dedup marks, totals) per partition, in a changelog with
``CONVMON_TOPIC_PARTITIONS`` partitions; the writer's group (range assignor) gives one worker partition p of the
re-keyed and verdicts topics (and of an input topic with as many partitions) together. An input topic with that many
partitions is processed where it is read (*direct*). Any other count (the Collector's ``otlp_spans`` is often created
with one) cannot be co-assigned with the state, so every input event is *forwarded*: re-produced under its conversation
id to convmon's ``<prefix>rekeyed`` topic, whose partitions are the state's, and processed there: one more produce and
consume per event, nothing else. Unkeyed input takes that path in either layout. The input topic is only read, never
written, created or altered (unless it is convmon's default ``<prefix>events``, which convmon creates as before).

Tansu (what ``convmon broker`` and the test fixtures run) is told by the cluster id its Metadata answers
carry, ``tansu_cluster`` unless started with another ``--cluster-id``. Only against it does the worker
load the workarounds for its known differences from Kafka (monitor/runtime/tansu.py: the loop that recreates
the topics a memory-only broker lost on restart).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiokafka.errors import KafkaError

from monitor.contracts.errors import ConfigError
from monitor.contracts.metrics import Metrics
from monitor.contracts.settings import KafkaSettings
from monitor.runtime.topics import Admin

log = logging.getLogger(__name__)
TANSU_CLUSTER_IDS = frozenset({"tansu_cluster"})  # Tansu's default --cluster-id, which convmon's embedded broker keeps


@dataclass(frozen=True)
class BrokerLayout:
    input_topic: str
    input_partitions: int
    internal_partitions: int
    tansu: bool = False  # the broker is Tansu: load its workarounds (see above)

    @property
    def forward(self) -> bool:
        """Whether every input event goes through the re-keyed topic (the counts differ)."""
        return self.input_partitions != self.internal_partitions

    @classmethod
    def matching(cls, kafka: KafkaSettings) -> BrokerLayout:
        """The layout convmon creates for its default input: as many partitions as its own topics (on Kafka)."""
        return cls(kafka.input_topic_name, kafka.topic_partitions, kafka.topic_partitions)


async def read_layout(kafka: KafkaSettings) -> BrokerLayout:
    """The input topic's partition count from the broker; a missing input topic is a ConfigError.

    Listed before it is described: a broker that auto-creates topics (Tansu; Kafka with
    ``auto.create.topics.enable``) creates one that a metadata request names."""
    name = kafka.input_topic_name
    async with Admin(kafka) as admin:
        try:
            described = await admin.describe_topics([name]) if name in await admin.list_topics() else []
            cluster_id = (await admin.describe_cluster()).get("cluster_id")
        except KafkaError as exc:
            raise ConfigError(f"cannot describe the input topic {name!r} on {kafka.broker_url}: {exc!r}") from exc
    found = [t for t in described if t.get("topic") == name and not t.get("error_code")]
    if not found or not found[0].get("partitions"):
        raise ConfigError(f"the input topic {name!r} (CONVMON_INPUT_TOPIC) does not exist on {kafka.broker_url}: "
                          "create it (its producer owns it; convmon only reads it) or fix the setting")
    return BrokerLayout(name, len(found[0]["partitions"]), kafka.topic_partitions, cluster_id in TANSU_CLUSTER_IDS)


def report_layout(layout: BrokerLayout, metrics: Metrics) -> None:
    """Export both counts; when they differ, say once what that costs and how to avoid it."""
    metrics.input_partitions.set(layout.input_partitions)
    metrics.internal_partitions.set(layout.internal_partitions)
    if layout.forward:
        log.warning("input topic %s has %d partitions, convmon's topics %d (CONVMON_TOPIC_PARTITIONS): every input "
                    "event is forwarded through convmon's re-keyed topic (one more produce and consume per event; "
                    "counts are unaffected); give both the same count to process input where it is read",
                    layout.input_topic, layout.input_partitions, layout.internal_partitions)
