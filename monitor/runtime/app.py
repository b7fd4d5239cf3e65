"""The faust app: topics, tables and agents for the data flow in docs/architecture.md.

Each topic and agent scales out by partitions: run more workers with the same ``app_id`` (consumer
group). Topics carry raw bytes; agents decode them
themselves, because a faust agent dies on a ValueDecodeError.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import cast

import faust

from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import KafkaSettings, Settings
from monitor.runtime.delivery import CommitGate, GuardedTransport
from monitor.runtime.hotbatches import HotBatches
from monitor.runtime.log_ends import TansuTransport
from monitor.runtime.seeks import SeekingConsumer

# `conversations` and `sessions-control` are gone since the hot path runs in one agent (CHANGELOG.md).
# The input topic is not among them: it is the producer's (``CONVMON_INPUT_TOPIC``), or convmon's own
# ``<prefix>events`` when unset. ``rekeyed`` carries input events re-produced under their conversation id.
TOPIC_NAMES = ("rekeyed", "judge", "scores", "labels", "dead-letters")
CHECKPOINT_TOPIC_NAMES = ("verdicts",)  # the checkpoint engine's too (monitor/engine)


class App(faust.App):
    """faust's App with the worker's checkpoint, which its consumer asks before every offset commit
    (runtime/checkpoint.py, runtime/delivery.py; None until the worker's components are built), and the hot
    path's batches, which its consumer fills (runtime/hotbatches.py)."""

    checkpoint: CommitGate | None = None
    hot_batches: HotBatches | None = None


@dataclass(frozen=True)
class Topics:
    events: faust.TopicT  # the input topic (read only)
    rekeyed: faust.TopicT  # convmon's: input events re-keyed by conversation id
    hot: faust.TopicT  # what the hot path reads: the input and the re-keyed events
    judge: faust.TopicT
    scores: faust.TopicT
    labels: faust.TopicT
    dead_letters: faust.TopicT


def stage_topics(kafka: KafkaSettings) -> tuple[str, ...]:
    """The stage topics of the configured engine (without the prefix)."""
    return TOPIC_NAMES + (CHECKPOINT_TOPIC_NAMES if kafka.engine == "checkpoint" else ())


def topic_names(kafka: KafkaSettings) -> list[str]:
    """The topics convmon creates: its own, and the input when that is its default ``<prefix>events``."""
    own = [kafka.topic(name) for name in stage_topics(kafka)]
    return [kafka.input_topic_name, *own] if kafka.owns_input_topic else own


def credentials(kafka: KafkaSettings) -> faust.types.auth.CredentialsT | None:
    """Kafka SASL / TLS from settings; None means PLAINTEXT."""
    protocol = kafka.kafka_security_protocol
    context = None
    if protocol.endswith("SSL"):
        context = ssl.create_default_context(
            cafile=str(kafka.kafka_ssl_cafile) if kafka.kafka_ssl_cafile else None
        )
        if kafka.kafka_ssl_certfile:
            context.load_cert_chain(
                str(kafka.kafka_ssl_certfile),
                str(kafka.kafka_ssl_keyfile) if kafka.kafka_ssl_keyfile else None,
            )
    if protocol.startswith("SASL"):
        assert kafka.kafka_sasl_password is not None  # enforced by KafkaSettings validation
        return faust.SASLCredentials(
            username=kafka.kafka_sasl_username,
            password=kafka.kafka_sasl_password.get_secret_value(),
            mechanism=kafka.kafka_sasl_mechanism,
            ssl_context=context,
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def aiokafka_kwargs(kafka: KafkaSettings) -> dict[str, object]:
    """The same security settings for plain aiokafka clients (admin, producers, benchmarks)."""
    kwargs: dict[str, object] = {"security_protocol": kafka.kafka_security_protocol}
    creds = credentials(kafka)
    if isinstance(creds, faust.SASLCredentials):
        kwargs.update(
            sasl_mechanism=str(creds.mechanism.value),
            sasl_plain_username=creds.username,
            sasl_plain_password=creds.password,
            ssl_context=creds.ssl_context,
        )
    elif isinstance(creds, faust.SSLCredentials):
        kwargs["ssl_context"] = creds.context
    return kwargs


def broker_unreachable(kafka: KafkaSettings, exc: BaseException) -> ConfigError:
    """The one line every command prints when Kafka cannot be reached: the URL and the setting to fix."""
    return ConfigError(f"cannot reach Kafka at {kafka.broker_url} (CONVMON_BROKER_URL): {type(exc).__name__}")


def bootstrap(kafka: KafkaSettings) -> str:
    return kafka.broker_url.split("://", 1)[-1]


def create_app(settings: Settings, *, tansu: bool = False) -> tuple[App, Topics]:
    """``tansu``: the broker is Tansu (runtime/layout.py): its consumer also checks table restore ends."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)  # faust creates its datadir, not the parents
    app = App(
        settings.app_id,
        datadir=str(settings.data_dir / "{conf.name}-data"),  # faust's default is <app_id>-data in the cwd
        broker=settings.broker_url,
        broker_credentials=credentials(settings),
        store="memory://",  # tables are rebuilt from their Kafka changelogs on restart
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=settings.topic_replication,
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=10,
        broker_heartbeat_interval=1,
        broker_rebalance_timeout=20,
        web_enabled=False,
        autodiscover=False,
        # batch sends (faust's default linger is 0: one produce request per message); 5 ms of latency
        # is nothing next to a conversation's minutes, and raised the bare topology's rate about 40%
        producer_linger_ms=5,
        producer_max_batch_size=min(1 << 20, settings.max_request_bytes),  # a batch is one request
        producer_max_request_size=settings.max_request_bytes,
    )

    # faust's aiokafka transport with a consumer that commits no offsets after a failed delivery
    transport = TansuTransport if tansu else GuardedTransport
    app.transport = transport(app.conf.broker_consumer, app)

    def topic(name: str) -> faust.TopicT:
        return app.topic(
            settings.topic(name),
            key_serializer="raw",
            value_serializer="raw",
            partitions=settings.topic_partitions,
        )

    input_name, rekeyed_name = settings.input_topic_name, settings.topic("rekeyed")
    topics = Topics(
        events=app.topic(input_name, key_serializer="raw", value_serializer="raw"),
        rekeyed=topic("rekeyed"),
        hot=app.topic(input_name, rekeyed_name, key_serializer="raw", value_serializer="raw"),
        judge=topic("judge"),
        scores=topic("scores"),
        labels=topic("labels"),
        dead_letters=topic("dead-letters"),
    )
    # a fetch's records of both go to the hot path as one batch; up to two batches wait while one is processed
    app.hot_batches = HotBatches(app, topics.hot.topics, max_pending=2 * settings.event_batch,
                                 on_drop=lambda tp, offset: cast(SeekingConsumer, app.consumer).read_again(tp, offset))
    return app, topics
