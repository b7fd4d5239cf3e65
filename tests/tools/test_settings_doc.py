"""Every setting is documented in docs/settings.md, generated from the settings model (the committed page equals
the generator's output), and no CONVMON_* name the README or the settings page mentions is stale."""

from __future__ import annotations

import re

import pytest

from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.tools import settings_doc

SETTINGS = {f"CONVMON_{name.upper()}" for name in Settings.model_fields}


def _names(text: str) -> set[str]:
    return set(re.findall(r"\bCONVMON_[A-Z0-9_]*[A-Z0-9]\b", text))


def test_the_committed_page_is_the_generated_one() -> None:
    assert settings_doc.PAGE.read_text(encoding="utf-8") == settings_doc.generate(), (
        "docs/settings.md is stale: run `python -m monitor.tools.settings_doc --write`")


def test_every_setting_is_on_the_page() -> None:
    page = settings_doc.PAGE.read_text(encoding="utf-8")
    assert sorted(SETTINGS - _names(page)) == []


@pytest.mark.parametrize("doc", ["README.md", "docs/settings.md", "docs/input.md", "docs/reliability.md",
                                 "docs/performance.md"])
def test_every_convmon_name_mentioned_is_a_setting(doc: str) -> None:
    unknown = sorted(_names((REPO_ROOT / doc).read_text(encoding="utf-8")) - SETTINGS)
    assert not unknown, f"{doc} mentions settings that do not exist: {unknown}"


def test_a_setting_without_description_or_row_fails_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = tuple(r for r in settings_doc.ROWS if "CONVMON_SAMPLE_RATE" not in r[0])
    monkeypatch.setattr(settings_doc, "ROWS", rows)
    with pytest.raises(ConfigError, match="CONVMON_SAMPLE_RATE"):
        settings_doc.generate()
    monkeypatch.setattr(settings_doc, "ROWS", (*rows, (("CONVMON_SAMPLE_RATE", "CONVMON_GONE"), "", "")))
    with pytest.raises(ConfigError, match="stale rows \\['CONVMON_GONE'\\]"):
        settings_doc.generate()


def test_a_row_whose_written_default_is_not_the_models_fails_the_generator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # CONVMON_PII_PHONE_REGIONS was documented as ["US"] long after its default became 14 regions
    rows = tuple((names, '`["US"]`', meaning) if names == ("CONVMON_PII_PHONE_REGIONS",) else (names, default, meaning)
                 for names, default, meaning in settings_doc.ROWS)
    monkeypatch.setattr(settings_doc, "ROWS", rows)
    with pytest.raises(ConfigError, match=r"default is not the model's \['CONVMON_PII_PHONE_REGIONS'\]"):
        settings_doc.generate()


def test_the_check_sees_abbreviated_names_as_missing() -> None:
    # the table once wrote `..._SASL_MECHANISM` after CONVMON_KAFKA_SECURITY_PROTOCOL: that is no mention
    assert _names("`CONVMON_KAFKA_SECURITY_PROTOCOL`, `..._SASL_MECHANISM`") == {"CONVMON_KAFKA_SECURITY_PROTOCOL"}
    assert _names("the CONVMON_* settings") == set()
