"""The judge's settings section: the largest, and the only one with secrets and redaction rules.

Part of :class:`monitor.contracts.settings.Settings` like the others in :mod:`monitor.contracts.sections`
(which re-exports it).
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from monitor.contracts.setting_values import DEFAULT_PRICES, StringList

# What judge_profile=local changes (docs/judge.md): one request at a time, long calls, no retry of a timeout.
LOCAL_PROFILE: dict[str, Any] = {"judge_concurrency": 1, "judge_timeout_s": 600.0, "judge_retry_timeouts": False}


class JudgeSettings(BaseModel):
    """The LLM judge: endpoint, model(s), mode, limits, budget and redaction."""

    model_config = ConfigDict(frozen=True)

    judge_mode: Literal["spur", "likert", "logprobs"] = "spur"
    judge_model: str = "gpt-4o-mini"
    judge_models: StringList = Field(default_factory=list)
    judge_jury_size: int = Field(default=1, ge=1)
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("CONVMON_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(  # may carry user:pass@: never in a repr or a log
        default=None, validation_alias=AliasChoices("CONVMON_OPENAI_BASE_URL", "OPENAI_BASE_URL"), repr=False
    )
    azure_api_version: str | None = None
    judge_concurrency: int = Field(default=8, ge=1)
    judge_requests_per_minute: float = Field(default=500.0, gt=0)
    judge_tokens_per_minute: float = Field(default=200_000.0, gt=0)
    judge_daily_budget_usd: float = Field(default=50.0, ge=0)
    judge_prices: dict[str, tuple[float, float]] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    judge_max_retries: int = Field(default=5, ge=0)
    judge_timeout_s: float = Field(default=60.0, gt=0)
    judge_max_prompt_chars: int = Field(default=24_000, ge=1000)
    pii_extra_patterns: StringList = Field(default_factory=list)
    # Countries whose national-format phone numbers are redacted (phonenumbers' default regions, tried
    # in order); international +CC numbers of any country are redacted whatever this says. The default is
    # monitor.judge.redact.PHONE_REGIONS (was ["US"]).
    pii_phone_regions: StringList = Field(default_factory=lambda: [
        "US", "GB", "DE", "FR", "ES", "IT", "NL", "BR", "IN", "JP", "AU", "PL", "SE", "CA"])
    pii_raw_internal_topics: bool = Field(default=False, description=(
        "Keep turn text raw in convmon's internal topics (state changelog, re-key hop, judge, labels) for "
        "teams that own the cluster. Default false: text is redacted once, where it enters the process. "
        "Metadata is redacted either way; the judge request, label store, dead letters and OTLP events are "
        "always redacted. True also means the classifiers score raw text while trained on redacted labels."))
    pii_reference_key: SecretStr | None = Field(default=None, description=(
        "Key of the opaque conversation references (HMAC-SHA256) that exemplars and log lines carry instead of "
        "conversation ids; at least 16 characters. Unset: a random key created once and kept in the label "
        "store's database (<prefix>reference_key), shared by every worker on that database."))
    # Judge client details: JSON-schema answers when the endpoint allows them (it falls back
    # down to a plain schema, then free text, when the endpoint refuses it: monitor/judge/formats.py), answer length
    # cap, sampling temperature, retry backoff.
    judge_structured_output: bool = True
    judge_max_output_tokens: int = Field(default=1500, ge=16)
    judge_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    judge_backoff_base_s: float = Field(default=0.5, ge=0.0)
    judge_backoff_max_s: float = Field(default=30.0, ge=0.0)
    # How judge answers are read (docs/security.md): "none" = exactly one JSON object valid against
    # the mode's schema; "strip_prose" also accepts one such object inside prose or a code fence (counted);
    # "lenient" = the tolerant free-text parser, for endpoints that cannot answer in JSON (counted).
    judge_answer_repair: Literal["none", "strip_prose", "lenient"] = "none"
    # Ask the judge (SPUR mode) for a one-sentence reason per item ("why", at most
    # monitor.judge.strict.MAX_EXPLANATION characters), sent out as gen_ai.evaluation.explanation and kept in the
    # label store and the score store beside the verdict, redacted. On by default; other modes have no room for it.
    judge_explanations: bool = True
    # Real and local OpenAI-compatible servers (docs/judge.md).
    judge_profile: Literal["hosted", "local"] = Field(
        default="hosted",
        description="Defaults for the kind of endpoint: 'local' (llama.cpp llama-server, Ollama, vLLM on one box) "
        "means judge_concurrency=1, judge_timeout_s=600, judge_retry_timeouts=false; settings given explicitly "
        "still win.",
    )
    judge_retry_timeouts: bool = Field(
        default=True,
        description="Retry a judge call that timed out. Off for single-stream local servers, which keep computing "
        "an abandoned request while the retry queues behind it.",
    )
    judge_repair_prompt: Literal["auto", "always", "never"] = Field(
        default="auto",
        description="Send one repair prompt after an unusable answer: 'auto' only when judge_temperature > 0 (at "
        "temperature 0 a model mostly repeats itself, so the prompt is pure cost), 'always', or 'never'.",
    )
    # Judge answers padded to 60 MB were read and parsed whole.
    judge_max_answer_bytes: int = Field(
        default=1_048_576, ge=4096,
        description="Largest judge HTTP answer read, in bytes (checked on Content-Length and while reading); a "
        "larger one is dropped unread and the conversation dead-lettered judge_answer_too_large. Tokens are capped "
        "by judge_max_output_tokens: an answer reporting more completion tokens than asked for is refused too.",
    )

    @model_validator(mode="before")
    @classmethod
    def _apply_profile(cls, data: Any) -> Any:
        """The profile's defaults for the settings not given explicitly."""
        if isinstance(data, dict) and data.get("judge_profile") == "local":
            for name, value in LOCAL_PROFILE.items():
                data.setdefault(name, value)
        return data

    @model_validator(mode="after")
    def _check_explanations(self) -> Self:
        explicit = "judge_explanations" in self.model_fields_set  # the default applies to the modes that can
        if explicit and self.judge_explanations and self.judge_mode != "spur":
            raise ValueError(f"judge_explanations needs judge_mode=spur (its JSON answer has room for a reason per "
                             f"item); judge_mode is {self.judge_mode!r}")
        return self

    @field_validator("pii_reference_key")
    @classmethod
    def _check_reference_key(cls, key: SecretStr | None) -> SecretStr | None:
        if key is not None and len(key.get_secret_value()) < 16:
            raise ValueError("pii_reference_key needs at least 16 characters (a random string)")
        return key

    @field_validator("pii_phone_regions")
    @classmethod
    def _check_phone_regions(cls, regions: list[str]) -> list[str]:
        import phonenumbers  # here, not at import: settings load must stay light

        out = [r.strip().upper() for r in regions]
        unknown = [r for r in out if r not in phonenumbers.SUPPORTED_REGIONS]
        if unknown:
            raise ValueError(f"unknown region codes {unknown}: use ISO 3166 alpha-2 codes such as US, GB, DE")
        return out

    @property
    def judge_configured(self) -> bool:
        return self.openai_api_key is not None or self.openai_base_url is not None
