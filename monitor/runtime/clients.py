"""Kafka client settings every convmon process shares: the topic names, the bootstrap address and SASL / TLS.

Each topic scales out by partitions: run more workers with the same ``app_id``. The input topic is not among
convmon's own: it is the producer's (``CONVMON_INPUT_TOPIC``), or convmon's ``<prefix>events`` when unset.
``rekeyed`` carries input events re-produced under their conversation id; ``verdicts`` the judge's answers, on
the conversation's partition, for its writer to count (monitor/engine).
"""

from __future__ import annotations

import ssl

from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import KafkaSettings

TOPIC_NAMES = ("rekeyed", "judge", "verdicts", "scores", "labels", "dead-letters")


def topic_names(kafka: KafkaSettings) -> list[str]:
    """The topics convmon creates: its own, and the input when that is its default ``<prefix>events``."""
    own = [kafka.topic(name) for name in TOPIC_NAMES]
    return [kafka.input_topic_name, *own] if kafka.owns_input_topic else own


def ssl_context(kafka: KafkaSettings) -> ssl.SSLContext | None:
    """The TLS context of an ``SSL`` or ``SASL_SSL`` protocol; None otherwise."""
    if not kafka.kafka_security_protocol.endswith("SSL"):
        return None
    context = ssl.create_default_context(cafile=str(kafka.kafka_ssl_cafile) if kafka.kafka_ssl_cafile else None)
    if kafka.kafka_ssl_certfile:
        context.load_cert_chain(str(kafka.kafka_ssl_certfile),
                                str(kafka.kafka_ssl_keyfile) if kafka.kafka_ssl_keyfile else None)
    return context


def aiokafka_kwargs(kafka: KafkaSettings) -> dict[str, object]:
    """Security keyword arguments for aiokafka's clients (consumers, producers, admin); PLAINTEXT adds none."""
    kwargs: dict[str, object] = {"security_protocol": kafka.kafka_security_protocol}
    context = ssl_context(kafka)
    if context is not None:
        kwargs["ssl_context"] = context
    if kafka.kafka_security_protocol.startswith("SASL"):
        assert kafka.kafka_sasl_password is not None  # enforced by KafkaSettings validation
        kwargs.update(sasl_mechanism=kafka.kafka_sasl_mechanism, sasl_plain_username=kafka.kafka_sasl_username,
                      sasl_plain_password=kafka.kafka_sasl_password.get_secret_value())
    return kwargs


def broker_unreachable(kafka: KafkaSettings, exc: BaseException) -> ConfigError:
    """The one line every command prints when Kafka cannot be reached: the URL and the setting to fix."""
    return ConfigError(f"cannot reach Kafka at {kafka.broker_url} (CONVMON_BROKER_URL): {type(exc).__name__}")


def bootstrap(kafka: KafkaSettings) -> str:
    return kafka.broker_url.split("://", 1)[-1]
