"""`convmon judge check` against the test server's real-server flavours."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from monitor.cli import app
from monitor.judge.check import check_endpoint
from tests.support.judge_wiring import API_KEY


@pytest.mark.parametrize(("flavour", "level", "settings"), [
    ("good", "rules_schema", {}),
    ("vllm_no_rules", "plain_schema", {}),
    ("llama_cpp_python", "json_object", {}),
    ("fastapi_422", "none",
     {"CONVMON_JUDGE_STRUCTURED_OUTPUT": "false", "CONVMON_JUDGE_ANSWER_REPAIR": "lenient"}),
])
async def test_the_check_reports_what_the_endpoint_takes(make_settings, rubric, metrics, server, flavour, level,
                                                         settings) -> None:
    server.default = flavour
    report = await check_endpoint(make_settings().judge, rubric, metrics)
    assert report.reachable.ok and report.reachable.latency_s is not None
    assert report.structured_output == level
    assert report.logprobs.ok and report.yes_no_mass is not None and report.yes_no_mass > 0.5
    assert report.endpoint == f"127.0.0.1:{server.port}"
    for name, value in settings.items():
        assert report.settings[name] == value
    assert ("CONVMON_JUDGE_STRUCTURED_OUTPUT" in report.settings) == (level == "none")
    assert report.settings["CONVMON_JUDGE_PROFILE"] == "local"  # 127.0.0.1 is a local endpoint


async def test_no_logprobs_and_logprobs_mode_says_use_spur(make_settings, rubric, metrics, server) -> None:
    server.default = "no_logprobs"
    report = await check_endpoint(make_settings(judge_mode="logprobs").judge, rubric, metrics)
    assert not report.logprobs.ok and report.settings["CONVMON_JUDGE_MODE"] == "spur"


async def test_an_unreachable_endpoint_is_not_usable(make_settings, rubric, metrics, server) -> None:
    server.default = "401"
    report = await check_endpoint(make_settings().judge, rubric, metrics)
    assert not report.usable and "credentials" in report.reachable.detail and API_KEY not in json.dumps(
        report.as_dict())


def test_the_cli_prints_one_json_object(server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVMON_OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("CONVMON_OPENAI_API_KEY", API_KEY)
    server.default = "fastapi_422"
    result = CliRunner().invoke(app, ["judge", "check", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["usable"] and report["structured_output"] == "none" and report["logprobs"]["ok"]
    text = CliRunner().invoke(app, ["judge", "check"])
    assert "structured output: none" in text.stdout and "CONVMON_JUDGE_STRUCTURED_OUTPUT=false" in text.stdout


def test_decoding_speed_is_the_fastest_probe_per_token_not_the_first_answer() -> None:
    """Measured on llama-cpp-python (SmolLM2-135M, busy CPU): the first, one-word answer took 5.6 s for 2 tokens
    (the server's warm-up and prefill), the 16-token one 0.58 s; the advice must not ask for a timeout of hours."""
    from monitor.judge.check import _seconds_per_output_token
    from monitor.judge.completion import Completion, Usage

    def answer(latency: float, tokens: int) -> Completion:
        return Completion("x", "m", "stop", Usage(10, tokens), 0.0, latency)

    assert _seconds_per_output_token([answer(5.6, 2), answer(0.58, 16)]) == round(0.58 / 16, 4)
    assert _seconds_per_output_token([None, answer(1.0, 0)]) is None
