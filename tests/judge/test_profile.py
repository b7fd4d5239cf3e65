"""judge_profile=local: one request at a time, long calls, a timeout is not retried; explicit
settings still win, from the environment as from arguments."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from monitor.contracts.errors import JudgeUnavailable
from monitor.contracts.settings import Settings, load_settings
from monitor.judge.client import JudgeClient
from tests.support.judge_wiring import API_KEY, sample


def test_the_local_profile_sets_what_was_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    local = load_settings(judge_profile="local")
    assert (local.judge_concurrency, local.judge_timeout_s, local.judge_retry_timeouts) == (1, 600.0, False)
    assert local.judge.judge_concurrency == 1  # the section the judge agent and client are built from
    hosted = load_settings()
    assert (hosted.judge_concurrency, hosted.judge_timeout_s, hosted.judge_retry_timeouts) == (8, 60.0, True)
    monkeypatch.setenv("CONVMON_JUDGE_PROFILE", "local")
    monkeypatch.setenv("CONVMON_JUDGE_TIMEOUT_S", "900")
    explicit = load_settings(judge_concurrency=2)
    assert (explicit.judge_concurrency, explicit.judge_timeout_s, explicit.judge_retry_timeouts) == (2, 900.0, False)


async def test_a_timeout_is_not_retried_when_so_configured(make_settings, metrics, server) -> None:
    server.default = "slow"
    server.slow_s = 1.0
    settings = make_settings(judge_profile="local", judge_timeout_s=0.2)
    client = JudgeClient(settings.judge, metrics)
    with pytest.raises(JudgeUnavailable, match=r"did not answer within judge_timeout_s=0.2s .* not retried"):
        await client.complete([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1
    assert sample(metrics, "convmon_judge_retries_total", cause="timeout") == 0
    await client.aclose()


def test_an_unknown_profile_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"judge_profile"):
        Settings(openai_api_key=API_KEY, judge_profile="laptop")
