"""One frozen settings object, read from the environment and an optional ``convmon.toml``.

The CLI builds it once and passes each component its section (``settings.judge``, ``settings.kafka``,
...); no other module reads the environment. Every field can be set as ``CONVMON_<FIELD>`` (upper case)
or as a key in ``convmon.toml``; the OpenAI credentials also accept the standard ``OPENAI_API_KEY`` /
``OPENAI_BASE_URL`` variables. The sections live in :mod:`monitor.contracts.sections` (importable
from here too) and the value types in :mod:`monitor.contracts.setting_values`.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from monitor.contracts.errors import ConfigError
from monitor.contracts.review_section import ReviewSettings
from monitor.contracts.sections import (
    DistillSettings,
    DriftSettings,
    JudgeSettings,
    KafkaSettings,
    MetricsSettings,
    OtelSettings,
    RubricSettings,
    StreamSettings,
)
from monitor.contracts.setting_values import DEFAULT_PRICES, REPO_ROOT

__all__ = [  # the public names users, tools and tests import from here
    "DEFAULT_PRICES", "REPO_ROOT", "DistillSettings", "DriftSettings", "JudgeSettings", "KafkaSettings",
    "MetricsSettings", "OtelSettings", "ReviewSettings", "RubricSettings", "Settings", "StreamSettings",
    "load_settings",
]

S = TypeVar("S", bound=BaseModel)


class Settings(KafkaSettings, StreamSettings, JudgeSettings, RubricSettings, DistillSettings, MetricsSettings,
               DriftSettings, OtelSettings, ReviewSettings, BaseSettings):
    """Every ``CONVMON_*`` setting, flat, as users set them; components receive only their section."""

    model_config = SettingsConfigDict(
        env_prefix="CONVMON_",
        toml_file="convmon.toml",
        frozen=True,
        extra="forbid",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    def section(self, cls: type[S]) -> S:
        """This settings' values for one section, as its own frozen object."""
        return cls.model_construct(**{name: getattr(self, name) for name in cls.model_fields})  # validated already

    @property
    def kafka(self) -> KafkaSettings:
        return self.section(KafkaSettings)

    @property
    def stream(self) -> StreamSettings:
        return self.section(StreamSettings)

    @property
    def judge(self) -> JudgeSettings:
        return self.section(JudgeSettings)

    @property
    def rubrics(self) -> RubricSettings:
        return self.section(RubricSettings)

    @property
    def distill(self) -> DistillSettings:
        return self.section(DistillSettings)

    @property
    def metrics(self) -> MetricsSettings:
        return self.section(MetricsSettings)

    @property
    def drift(self) -> DriftSettings:
        return self.section(DriftSettings)

    @property
    def otel(self) -> OtelSettings:
        return self.section(OtelSettings)

    @property
    def review(self) -> ReviewSettings:
        return self.section(ReviewSettings)


_SOURCE_FIELD = re.compile(r'field "(\w+)"')


def load_settings(**overrides: Any) -> Settings:
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except SettingsError as exc:  # a JSON-valued setting that is not JSON
        found = _SOURCE_FIELD.search(str(exc))
        field = found.group(1) if found else "<settings>"
        raise ConfigError(f"setting '{field}' (CONVMON_{field.upper()} or convmon.toml): not valid JSON "
                          f"({exc.__cause__ or exc})") from exc
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "<settings>"
        name = str(err["loc"][0]) if err["loc"] else field
        raise ConfigError(f"setting '{field}' (CONVMON_{name.upper()} or convmon.toml): {err['msg']}") from exc
