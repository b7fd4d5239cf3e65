"""Every setting is documented: each field of Settings has its CONVMON_<FIELD> in the README, and every
CONVMON_* name the README mentions is a real setting (a stale name would send users to a no-op)."""

from __future__ import annotations

import re

from monitor.contracts.settings import REPO_ROOT, Settings

README = (REPO_ROOT / "README.md").read_text()


def _names(text: str) -> set[str]:
    return set(re.findall(r"\bCONVMON_[A-Z0-9_]*[A-Z0-9]\b", text))


def test_every_setting_is_in_the_readme() -> None:
    mentioned = _names(README)
    missing = sorted(f"CONVMON_{name.upper()}" for name in Settings.model_fields
                     if f"CONVMON_{name.upper()}" not in mentioned)
    assert not missing, f"settings with no mention in README.md: {missing}"


def test_every_convmon_name_in_the_readme_is_a_setting() -> None:
    fields = {f"CONVMON_{name.upper()}" for name in Settings.model_fields}
    unknown = sorted(_names(README) - fields)
    assert not unknown, f"README.md documents settings that do not exist: {unknown}"


def test_the_check_sees_abbreviated_names_as_missing() -> None:
    # the table once wrote `..._SASL_MECHANISM` after CONVMON_KAFKA_SECURITY_PROTOCOL: that is no mention
    assert _names("`CONVMON_KAFKA_SECURITY_PROTOCOL`, `..._SASL_MECHANISM`") == {"CONVMON_KAFKA_SECURITY_PROTOCOL"}
    assert _names("the CONVMON_* settings") == set()
