"""The frozen settings sections: each component is built from the one it needs.

:class:`monitor.contracts.settings.Settings` is all of them flat (the public ``CONVMON_*`` names);
``settings.kafka``, ``settings.judge`` ... hand a component its own section. The judge's and the hot path's
sections live in :mod:`monitor.contracts.judge_section` and :mod:`monitor.contracts.stream_section` and are
importable from here too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from monitor.contracts.judge_section import JudgeSettings
from monitor.contracts.setting_values import REPO_ROOT, RETRAIN_OFF, SCORERS, ScorerList, StringList
from monitor.contracts.stream_section import StreamSettings

KAFKA_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # Kafka's own rule (clients/.../internals/Topic.java)

__all__ = ["DistillSettings", "DriftSettings", "JudgeSettings", "KafkaSettings", "MetricsSettings", "OtelSettings",
           "RubricSettings", "StreamSettings"]


class KafkaSettings(BaseModel):
    """Where the Kafka cluster is and how to reach it; topic naming and partitions."""

    model_config = ConfigDict(frozen=True)

    broker_url: str = "kafka://127.0.0.1:9092"
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: Path | None = None
    kafka_ssl_certfile: Path | None = None
    kafka_ssl_keyfile: Path | None = None
    app_id: str = "convmon"
    topic_prefix: str = "convmon."
    topic_partitions: int = Field(default=4, ge=1)
    input_topic: str | None = Field(default=None, description=(
        "The topic convmon reads its input from (any partition count); convmon only reads it. Unset: "
        "<topic_prefix>events, which convmon creates if missing, as before. Any other topic must exist "
        "(created by its producer, e.g. the OpenTelemetry Collector's otlp_spans)."))
    # Topics created by workers or `convmon topics create` (monitor/runtime/topics.py): replication, and how
    # long the input, the scores and the dead letters are kept (changelogs are compacted instead).
    topic_replication: int = Field(default=1, ge=1)
    retention_events_s: float = Field(default=7 * 86400.0, ge=1)
    retention_scores_s: float = Field(default=30 * 86400.0, ge=1)
    retention_dead_letters_s: float = Field(default=30 * 86400.0, ge=1)

    @field_validator("input_topic")
    @classmethod
    def _kafka_topic_name(cls, value: str | None) -> str | None:
        if value is not None and (not KAFKA_TOPIC_NAME.fullmatch(value) or value in (".", "..")):
            raise ValueError(f"{value!r} is not a Kafka topic name: 1-249 characters of a-z, A-Z, 0-9, '.', "
                             "'_' and '-', not '.' or '..'")
        return value

    @model_validator(mode="after")
    def _check_security(self) -> Self:
        if self.kafka_security_protocol.startswith("SASL") and not (
            self.kafka_sasl_mechanism and self.kafka_sasl_username and self.kafka_sasl_password
        ):
            raise ValueError(
                "kafka_security_protocol=SASL_* needs kafka_sasl_mechanism, kafka_sasl_username and "
                "kafka_sasl_password (CONVMON_KAFKA_SASL_*)"
            )
        own = {self.topic(n) for n in ("rekeyed", "judge", "verdicts", "scores", "labels", "dead-letters")}
        if self.input_topic is not None and (self.input_topic in own or self.input_topic.startswith(f"{self.app_id}-")):
            raise ValueError(f"input_topic {self.input_topic!r} is one of convmon's own topics (CONVMON_INPUT_TOPIC "
                             "names the topic your producers write; convmon writes the others)")
        return self

    def topic(self, name: str) -> str:
        """Full topic name for a stage (``events``, ``scores``, ``dead-letters``, ...)."""
        return f"{self.topic_prefix}{name}"

    @property
    def input_topic_name(self) -> str:
        """The topic read as input: ``input_topic``, or convmon's own ``<prefix>events``."""
        return self.input_topic or self.topic("events")

    @property
    def owns_input_topic(self) -> bool:
        """Whether the input is convmon's own ``<prefix>events`` (created by convmon), not a producer's topic."""
        return self.input_topic_name == self.topic("events")


class RubricSettings(BaseModel):
    """Which rubric set to score and where prompts live."""

    model_config = ConfigDict(frozen=True)

    prompts_dir: Path = REPO_ROOT / "prompts"
    rubric_set: str = "spur-copilot"
    domain_description: str = "a general-purpose AI chat assistant"


class DistillSettings(BaseModel):
    """Labels, the model registry, retraining and calibration."""

    model_config = ConfigDict(frozen=True)

    model_registry: Path = Path("var/models")
    registry_poll_s: float = Field(default=10.0, gt=0)
    label_store_url: str = "sqlite:///var/labels.db"
    label_retention_days: int = Field(default=90, ge=1)
    featurizer: str = "hashing"
    # How the minilm featurizer runs for new models: int8 ONNX (onnxruntime) or fp32 torch; a model is always
    # served with the backend it was trained with. The ONNX file is built once into model_cache_dir (None: the
    # user cache dir, ~/.cache/convmon/models) or ahead of time by `convmon models build-onnx`.
    embedding_backend: Literal["onnx-int8", "torch"] = "onnx-int8"
    model_cache_dir: Path | None = None
    # When `convmon retrain` runs a round (cron, croniter syntax; a 6th field is seconds). "off" or empty:
    # never (`convmon retrain --once` then does nothing either). Workers never retrain.
    retrain_cron: str | None = "*/15 * * * *"
    retrain_min_labels: int = Field(default=50, ge=10)
    # Deprecated alias: every this many seconds instead of retrain_cron (it used to make the worker leader retrain).
    retrain_interval_s: float | None = Field(default=None, gt=0)
    retrain_metrics_port: int = Field(default=9101, ge=0, le=65535)  # `convmon retrain`'s /metrics (on metrics_host)
    label_buffer_max: int = Field(default=10_000, ge=1)
    # Drill-down: a score sink writes the "yes" verdicts of every score record to <prefix>score_items in the label
    # store's database (`convmon ui`, Grafana's table of the latest DSAT conversations, `convmon inspect`).
    score_store: bool = True
    score_retention_days: int = Field(default=90, ge=1, description=(
        "Score items (<prefix>score_items) older than this are purged every hour, like labels "
        "past label_retention_days."))
    distill_holdout_fraction: float = Field(default=0.25, gt=0.0, lt=1.0)
    distill_min_positives: int = Field(default=10, ge=3)
    distill_gate_tolerance: float = Field(default=0.01, ge=0.0)
    distill_report_dir: Path = Path("var/reports")
    # LLM-Rubric calibration of the judge into P(satisfied) against user feedback (docs/calibration.md).
    # Retrained with the distilled models once this many judged conversations carry thumbs or CSAT; 0 = never.
    calibration_min_labels: int = Field(default=200, ge=0)
    calibration_csat_neutral: Literal["na", "satisfied", "unsatisfied"] = "na"  # what a CSAT of 3 means
    calibration_tenant_key: str | None = None  # metadata key whose value splits label sources: thumbs:<tenant>
    calibration_label_source: str | None = None  # whose satisfaction to serve; None = the shared model

    @field_validator("retrain_cron")
    @classmethod
    def _check_cron(cls, value: str | None) -> str | None:
        if value is None or value.strip().lower() in RETRAIN_OFF:
            return None
        from croniter import croniter  # only when a schedule is set: `convmon --help` stays fast

        if not croniter.is_valid(value.strip()):
            raise ValueError(f"{value!r} is not a cron expression (minute hour day month weekday [second]); "
                             "use 'off' to turn retraining off")
        return value.strip()

    @property
    def retrain_enabled(self) -> bool:
        return self.retrain_cron is not None or self.retrain_interval_s is not None


class MetricsSettings(BaseModel):
    """What /metrics serves and which label values it may carry."""

    model_config = ConfigDict(frozen=True)

    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=9100, ge=0, le=65535)
    metric_dimensions: StringList = Field(default_factory=lambda: ["app", "locale", "model_version"])
    dimension_cap: int = Field(default=20, ge=1)
    # Values of a dimension always exported as themselves (they count towards dimension_cap);
    # listing them makes every worker agree on which values are kept and which become "other".
    dimension_values: dict[str, list[str]] = Field(default_factory=dict)
    dimension_value_pattern: str | None = Field(default=None, description=(
        "A regular expression that a dimension value not listed in CONVMON_DIMENSION_VALUES must match whole "
        "to be exported as itself (first-come, up to CONVMON_DIMENSION_CAP per dimension), e.g. "
        "'[a-z][a-z0-9._-]{0,31}'; unset, every unlisted value is exported as 'other' (metadata may hold "
        "user data). Its safety is the operator's call (docs/security.md)."))
    # Most series the dimensioned metrics may use, all dimensions together: a new combination of
    # dimension values that would pass it is exported with values folded into "other" (counted, never dropped).
    metric_series_budget: int = Field(default=50_000, ge=1000)
    # Liveness: the worker's event loop is stalled when it has not ticked for this long (/healthz, /readyz fail).
    health_stall_s: float = Field(default=30.0, ge=2.0)

    @field_validator("dimension_value_pattern")
    @classmethod
    def _check_value_pattern(cls, value: str | None) -> str | None:
        import re

        if value is None or not value.strip():
            return None
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"{value!r} is not a regular expression: {exc}") from exc
        return value


class DriftSettings(BaseModel):
    """Drift detectors and judge/distilled agreement."""

    model_config = ConfigDict(frozen=True)

    drift_window: int = Field(default=500, ge=10)
    drift_reference_size: int = Field(default=1000, ge=10)  # first-N fallback when no reference is given
    drift_batch_size: int = Field(default=50, ge=1)  # conversations per rate sample of the change detectors
    drift_hold_s: float = Field(default=900.0, gt=0)  # how long convmon_drift_detected stays 1
    drift_feature_interval_s: float = Field(default=15.0, ge=0)  # min seconds between domain-classifier fits
    agreement_window: int = Field(default=500, ge=10)
    anchors_set: str = Field(default="default", min_length=1, max_length=128, description=(
        "name of the anchor set `convmon anchors run` re-judges (its latest loaded version)"))
    anchors_interval_s: float = Field(default=86_400.0, ge=60, description=(
        "seconds between scheduled re-judgings of the anchor set; a change of the judge's provenance starts "
        "one sooner"))
    anchors_check_s: float = Field(default=3_600.0, ge=10, description=(
        "seconds between provenance checks of `convmon anchors run` (one short call to a configured judge "
        "endpoint reads the model it reports)"))
    anchors_alpha: float = Field(default=0.01, gt=0, lt=0.5, description=(
        "false-alarm probability of the judge-drift test over the whole rubric and every run, however long "
        "it runs"))
    anchors_metrics_port: int = Field(default=9465, ge=0, le=65535, description=(
        "port of the /metrics endpoint of `convmon anchors run` (0: none)"))


class OtelSettings(BaseModel):
    """OpenTelemetry: the input format of the events topic (convmon JSON, OpenAI chat logs or OTLP GenAI telemetry
    from the Collector's kafka exporter) and verdicts out as ``gen_ai.evaluation.result`` log events (docs/otel.md)."""

    model_config = ConfigDict(frozen=True)

    input_format: Literal["json", "openai", "otlp_traces", "otlp_logs"] = "json"
    otlp_encoding: Literal["otlp_proto", "otlp_json"] = "otlp_proto"  # the kafka exporter's `encoding`
    # Attributes (span, then resource) that name the conversation when gen_ai.conversation.id is absent.
    otlp_conversation_attributes: StringList = Field(default_factory=lambda: ["session.id"])
    # Metric dimension -> the span/resource attribute it is read from (a dimension not listed is read from the
    # attribute of its own name; model_version falls back to gen_ai.response.model, then gen_ai.request.model).
    otlp_dimension_attributes: dict[str, str] = Field(default_factory=lambda: {"app": "service.name"})
    otlp_thumbs_attribute: str | None = None  # e.g. "app.feedback.thumbs": up/down, true/false, 1/-1
    otlp_csat_attribute: str | None = None  # e.g. "app.feedback.csat": 1..5
    otlp_end_attribute: str | None = None  # e.g. "app.conversation.ended": a true value ends the conversation
    # Verdicts as OTLP log events through the OpenTelemetry SDK (endpoint etc. from the standard OTEL_* variables).
    otel_evaluation_events: bool = False
    otel_evaluation_scorers: ScorerList = Field(default_factory=lambda: list(SCORERS))
    otel_evaluation_conversation_id: Literal["reference", "raw"] = Field(
        default="reference",
        description="What gen_ai.conversation.id carries in evaluation events: 'reference' (the keyed, "
                    "non-reversible ref-<hex> of CONVMON_PII_REFERENCE_KEY, which `convmon forget` and the score "
                    "store resolve) or 'raw' (the input's id, for ids known to hold no personal data). Events are "
                    "parented to the judged span either way when the input carried it.")
    otel_evaluation_queue_size: int = Field(
        default=8192, ge=1, le=1_000_000,
        description="Evaluation events held while the OTLP endpoint is slow or down (in place of "
                    "OTEL_BLRP_MAX_QUEUE_SIZE); further events are dropped and counted in "
                    "convmon_evaluation_events_total{outcome=\"queue_full\"}. About 400 conversations of 20 items.")

    # Content by reference (gen_ai.input.messages_ref / gen_ai.output.messages_ref; monitor/stages/content_refs.py)
    otlp_content_resolver: str | None = Field(
        default=None,
        description="Fetch messages that spans carry by reference: unset (off), 'http' (the URL template below) or "
                    "'package.module:factory' (a resolver of your own, called with these settings).")
    otlp_content_url_template: str | None = Field(
        default=None,
        description="URL to GET a reference's messages from, with {ref} (the whole reference, percent-encoded), "
                    "{bucket} (its host part) and {key} (its path), e.g. https://content.internal/{bucket}/{key}.")
    otlp_content_allowed_hosts: StringList = Field(
        default_factory=list, description="Hosts the content URLs may name (exact names); required with 'http'.")
    otlp_content_authorization: SecretStr | None = Field(
        default=None, description="Authorization header value sent to the content store (never taken from spans).")
    otlp_content_timeout_s: float = Field(default=5.0, gt=0, le=60,
                                          description="Timeout of one content fetch, seconds.")
    otlp_content_max_bytes: int = Field(default=1 << 20, ge=1024, le=64 << 20,
                                        description="Largest content fetched for one reference, bytes.")
    otlp_content_cache_size: int = Field(default=1024, ge=0, le=1_000_000,
                                         description="References whose content is kept (least recently used out).")

    @model_validator(mode="after")
    def _check_otel(self) -> Self:
        if any(not a.strip() for a in self.otlp_conversation_attributes):
            raise ValueError("otlp_conversation_attributes: empty attribute name")
        name = self.otlp_content_resolver
        if name == "http":
            template = self.otlp_content_url_template or ""
            if not any(p in template for p in ("{ref}", "{key}")):
                raise ValueError("otlp_content_resolver=http needs otlp_content_url_template with {ref} or {key}")
            if not self.otlp_content_allowed_hosts:
                raise ValueError("otlp_content_resolver=http needs otlp_content_allowed_hosts (the content store)")
        elif name is not None and not (":" in name and all(name.partition(":")[::2])):
            raise ValueError(f"otlp_content_resolver={name!r}: expected 'http' or 'package.module:factory'")
        return self
