"""List settings from the environment: the comma form and a JSON list; a bad value is one line naming it."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from distill.rubrics.cli import app
from monitor.contracts.errors import ConfigError
from monitor.contracts.setting_values import split_commas
from monitor.contracts.settings import Settings, load_settings

LISTS = ["judge_models", "pii_extra_patterns", "pii_phone_regions", "metric_dimensions",
         "otlp_conversation_attributes", "otlp_content_allowed_hosts"]


def test_every_list_setting_is_covered() -> None:
    listed = [name for name, f in Settings.model_fields.items() if getattr(f.annotation, "__origin__", None) is list
              or str(f.annotation).startswith(("list[", "StringList"))]
    assert sorted(listed) == sorted([*LISTS, "otel_evaluation_scorers"])


@pytest.mark.parametrize("raw", ["llm", '["llm"]', "llm,"])
def test_scorer_list_forms(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVMON_OTEL_EVALUATION_SCORERS", raw)
    assert load_settings().otel_evaluation_scorers == ["llm"]


def test_phone_regions_take_the_comma_form_and_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVMON_PII_PHONE_REGIONS", "us, GB")
    assert load_settings().pii_phone_regions in (["US", "GB"], ["us", "GB"])
    monkeypatch.setenv("CONVMON_PII_PHONE_REGIONS", "a,b")
    with pytest.raises(ConfigError, match="pii_phone_regions"):
        load_settings()


@pytest.mark.parametrize("name", [n for n in LISTS if n != "pii_phone_regions"])  # regions: real codes only
@pytest.mark.parametrize("raw", ["a,b", " a , b ", '["a", "b"]', "a,,b,"])
def test_comma_and_json_forms(name: str, raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"CONVMON_{name.upper()}", raw)
    assert getattr(load_settings(), name) == ["a", "b"]


def test_judge_models_comma_form_reaches_the_judge_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVMON_JUDGE_MODELS", "gpt-4o-mini,gpt-4.1-mini")
    assert load_settings().judge.judge_models == ["gpt-4o-mini", "gpt-4.1-mini"]


def test_regular_expressions_keep_their_commas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVMON_PII_EXTRA_PATTERNS", r"ACME-\d{3,4},ORD[,;]\w+, a\,b")
    patterns = load_settings().pii_extra_patterns
    assert patterns == [r"ACME-\d{3,4}", r"ORD[,;]\w+", r"a\,b"]
    assert re.fullmatch(patterns[0], "ACME-1234") and re.fullmatch(patterns[2], "a,b")
    assert split_commas("") == []


@pytest.mark.parametrize(("name", "raw", "expected"), [
    ("judge_models", '["a", "b"', "setting 'judge_models' (CONVMON_JUDGE_MODELS or convmon.toml): "),
    ("judge_models", "[1, 2]", "setting 'judge_models.0' (CONVMON_JUDGE_MODELS or convmon.toml): "),
    ("judge_prices", "gpt-4o:1,2", "setting 'judge_prices' (CONVMON_JUDGE_PRICES or convmon.toml): not valid JSON"),
])
def test_a_bad_value_is_one_line_naming_the_setting(name: str, raw: str, expected: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"CONVMON_{name.upper()}", raw)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith(expected) and "\n" not in str(caught.value)


def test_the_cli_reports_a_bad_list_setting_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("CONVMON_JUDGE_MODELS", "[a,b")
    data = tmp_path / "x.jsonl"
    data.write_text('{"conversation_id": "a", "label": "SAT", "turns": []}\n'
                    '{"conversation_id": "b", "label": "DSAT", "turns": []}\n')
    result = CliRunner().invoke(app, ["learn", "--labeled", str(data), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "setting 'judge_models'" in result.output
    assert "Traceback" not in result.output
