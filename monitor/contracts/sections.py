"""The frozen settings sections: each component is built from the one it needs.

:class:`monitor.contracts.settings.Settings` is all of them flat (the public ``CONVMON_*`` names);
``settings.kafka``, ``settings.judge`` ... hand a component its own section. The judge's section
lives in :mod:`monitor.contracts.judge_section` and is importable from here too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from monitor.contracts.judge_section import JudgeSettings
from monitor.contracts.setting_values import REPO_ROOT, RETRAIN_OFF, SCORERS, ScorerList, StringList

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


class StreamSettings(BaseModel):
    """The hot path: sessionizing, the judge slice, batching and the size limits on input."""

    model_config = ConfigDict(frozen=True)

    data_dir: Path = Path("var")
    sample_rate: float = Field(default=0.1, ge=0.0, le=1.0)
    idle_timeout_s: float = Field(default=300.0, gt=0)
    closed_retention_s: float = Field(default=3600.0, gt=0)
    dedup_window_s: float = Field(default=2 * 86400.0, gt=0)
    classify_batch: int = Field(default=256, ge=1)
    classify_within_s: float = Field(default=0.2, gt=0)
    max_event_bytes: int = Field(default=1_000_000, ge=1024)
    max_turns: int = Field(default=200, ge=2)
    max_chars: int = Field(default=100_000, ge=100)
    max_conversation_bytes: int = Field(default=262_144, ge=4096)  # JSON bytes of a session's turns
    max_metadata_bytes: int = Field(default=8192, ge=256)  # JSON bytes of a session's merged metadata
    max_request_bytes: int = Field(default=1_048_576, ge=65_536)  # the producer's max_request_size
    allowed_lateness_s: float = Field(default=5.0, ge=0)  # grace for turns after an end without turn_count
    max_open_conversations: int = Field(
        default=50_000, ge=1,
        description="Open conversations kept per input partition. At the cap, a new conversation first finishes "
                    "the partition's least recently active one early (end_reason idle, counted in "
                    "convmon_conversations_evicted_total{reason=\"max_open_conversations\"}); its later turns "
                    "reopen it as a new revision within the reopen window, else are late events. Bounds worker "
                    "memory whatever the input (about 2.5 KB each, docs/deployment.md).")
    max_closed_conversations: int = Field(
        default=100_000, ge=1000,
        description="Finished conversations remembered per input partition (a tombstone each, about 0.6 KB: "
                    "when and with how many turns it closed), for reopen_window_s + closed_retention_s, so a "
                    "redelivered event is skipped and a late one reopens it or is dead-lettered late_event. At "
                    "the cap the oldest is forgotten (convmon_closed_conversations_forgotten_total): a later event "
                    "of it starts a new conversation under its id, counted again. Bounds memory at any traffic: "
                    "raise it with the pod's memory where a partition finishes more than this many conversations "
                    "in reopen_window_s + closed_retention_s (docs/operations.md).")
    incomplete_conversations: Literal["dead_letter", "score"] = Field(
        default="dead_letter",
        description="A conversation with a rejected turn: 'dead_letter' sends it whole to the dead-letter topic "
                    "(reason conversation_incomplete, naming the turn and field); 'score' scores the turns that "
                    "remain, its score records and evaluation events marked incomplete. Counted either way in "
                    "convmon_conversations_incomplete_total{action}.")
    reopen_window_s: float = Field(
        default=86_400.0, ge=0,
        description="How long a scored conversation can be continued (default a day): a turn (or end) for it "
                    "within this window opens a new revision holding the whole conversation so far, which closes "
                    "like any conversation and is scored again (the distilled models always, the judge if the "
                    "conversation is in its slice); the new revision's counts replace the previous one's "
                    "(docs/metrics.md, Revisions). Past the window (and for closed_retention_s more) such an event "
                    "is dead-lettered late_event. 0 turns reopening off: a closed conversation's turns are deleted "
                    "at once, and every later event of it is dead-lettered late_event.")
    reopen_max_conversations: int = Field(
        default=10_000, ge=1,
        description="Scored conversations kept for reopening per input partition (their redacted turns, as an "
                    "open conversation keeps them, and a revision-ledger entry per scorer). At the cap the oldest "
                    "closed one is no longer reopenable: its later events are dead-lettered late_event. Bounds "
                    "memory and the state changelog: about 8 KB each for 6-turn conversations (docs/operations.md, "
                    "bench open-conversations).")
    event_batch: int = Field(default=1000, ge=1)  # records per hot-path batch (runtime/hotbatches.py)
    dedup_max_keys: int = Field(default=200_000, ge=1000)  # dedup marks kept per partition
    # The judge slice's inclusion probability pi(x) (monitor/stages/sampler.py): at least sample_rate,
    # raised by the distilled models' uncertainty (active_learning_rate: the extra share of traffic to spend on
    # average) and by negative user feedback (active_feedback_rate: pi of a thumbs-down / CSAT <= 2 conversation).
    # A conversation goes to the judge when hash(sample_salt, id) < pi(x); the empty salt is the hash of before.
    active_learning_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    active_feedback_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    active_uncertainty_measure: Literal["margin", "entropy"] = "margin"
    active_budget_pacing: bool = True  # boosts pause while the day's judge spend runs ahead of the day
    sample_salt: str = ""
    input_idle_warn_s: float = Field(
        default=300.0, ge=10.0,
        description="A worker that has consumed no input record for this long (since its start or its last record) "
                    "logs one warning naming the input topic; convmon_input_idle_seconds always shows the time.")

    @model_validator(mode="after")
    def _check_sampler(self) -> Self:
        if self.sample_rate == 0.0 and (self.active_learning_rate > 0.0 or self.active_feedback_rate > 0.0):
            raise ValueError(
                "active_learning_rate / active_feedback_rate need sample_rate > 0: the hash rate is the floor of "
                "every conversation's inclusion probability, and a conversation the judge can never see makes "
                "judge-based rates biased"
            )
        return self

    # Dead letters keep the original bytes only when this is set; by default they carry the redacted
    # text, with the original size and the reason in headers.
    dead_letter_raw: bool = False

    @model_validator(mode="after")
    def _check_bounds(self) -> Self:
        """Every session, finished conversation and record must fit one produce request."""
        worst = self.max_conversation_bytes + self.max_metadata_bytes + self.max_turns * 96 + 16_384
        if worst > self.max_request_bytes:
            raise ValueError(
                f"max_conversation_bytes + max_metadata_bytes + max_turns * 96 + 16 KiB = {worst} exceeds "
                f"max_request_bytes={self.max_request_bytes}: a finished conversation would not fit one "
                "produce request; lower the caps or raise max_request_bytes (and the broker's message.max.bytes)"
            )
        return self


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
