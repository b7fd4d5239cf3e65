from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from monitor.contracts.errors import BudgetExhausted, JudgeError, JudgeUnavailable
from monitor.contracts.settings import Settings
from monitor.judge import client as client_module
from monitor.judge.client import JudgeClient
from monitor.judge.completion import Usage, price_for, prompt_bound, retry_after
from tests.support.judge_wiring import API_KEY, sample

MESSAGES = [{"role": "system", "content": "rubric"}, {"role": "user", "content": "conversation"}]
Handler = Callable[[httpx.Request], httpx.Response]


def ok(text: str = "fine", *, usage: dict[str, Any] | None = None) -> httpx.Response:
    body = {
        "id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage or {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200,
                           "prompt_tokens_details": {"cached_tokens": 400}},
    }
    return httpx.Response(200, json=body)


def error(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json={"error": {"message": f"status {status}"}}, headers=headers)


class Recorder:
    """A MockTransport handler that plays responses in order and keeps the requests."""

    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        item = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(item, Exception):
            raise item
        return item

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the client's backoff sleeps instead of waiting."""
    recorded: list[float] = []

    async def fake_sleep(delay: float) -> None:
        recorded.append(delay)

    monkeypatch.setattr(client_module.asyncio, "sleep", fake_sleep)
    return recorded


def make_client(handler: Handler, metrics, **overrides: Any) -> JudgeClient:
    values: dict[str, Any] = {
        "openai_base_url": "http://judge.test/v1", "openai_api_key": API_KEY, "judge_backoff_base_s": 0.5,
        "judge_backoff_max_s": 4.0, "judge_max_retries": 3,
    }
    settings = Settings(**(values | overrides))
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return JudgeClient(settings.judge, metrics, http_client=http, rng=random.Random(0))


async def test_success_meters_tokens_spend_and_sends_the_key(metrics) -> None:
    handler = Recorder(ok("hello"))
    client = make_client(handler, metrics)
    messages = [*MESSAGES, {"role": "user", "content": "x" * 1000}]  # a bound above the 1000 tokens reported
    completion = await client.complete(messages)
    assert completion.text == "hello" and completion.finish_reason == "stop"
    assert completion.usage == Usage(prompt=1000, completion=200, cached=400)
    assert completion.cost_usd == pytest.approx((1000 * 0.15 + 200 * 0.60) / 1e6)
    assert completion.response_model == "gpt-4o-mini-2024-07-18"
    assert sample(metrics, "convmon_judge_requests_total", model="gpt-4o-mini", status="ok") == 1
    assert sample(metrics, "convmon_judge_tokens_total", model="gpt-4o-mini", kind="cached") == 400
    assert sample(metrics, "convmon_judge_spend_usd_total", model="gpt-4o-mini") == pytest.approx(completion.cost_usd)
    assert sample(metrics, "convmon_judge_request_duration_seconds_count", model="gpt-4o-mini") == 1
    assert sample(metrics, "convmon_judge_in_flight") == 0
    assert handler.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    body = handler.bodies()[0]
    assert body["max_tokens"] == 1500 and body["temperature"] == 0.0 and body["messages"] == messages


async def test_429_honours_retry_after_then_succeeds(metrics, sleeps) -> None:
    handler = Recorder(error(429, {"retry-after": "7"}), error(429, {"retry-after-ms": "250"}), ok())
    client = make_client(handler, metrics)
    await client.complete(MESSAGES)
    assert sleeps == [7.0, 0.25]
    assert sample(metrics, "convmon_judge_retries_total", cause="429") == 2
    assert sample(metrics, "convmon_judge_requests_total", model="gpt-4o-mini", status="rate_limited") == 2


async def test_5xx_backs_off_exponentially_with_jitter_then_gives_up(metrics, sleeps) -> None:
    handler = Recorder(error(503))
    client = make_client(handler, metrics)
    with pytest.raises(JudgeUnavailable, match=r"failed 4 times for model 'gpt-4o-mini' \(last: 5xx\)") as info:
        await client.complete(MESSAGES)
    assert info.value.reason == "judge_unavailable"
    assert len(handler.requests) == 4 and len(sleeps) == 3
    for attempt, delay in enumerate(sleeps, start=1):
        ceiling = min(4.0, 0.5 * 2 ** (attempt - 1))
        assert ceiling / 2 <= delay <= ceiling
    assert sample(metrics, "convmon_judge_retries_total", cause="5xx") == 3
    assert client.budget.spent_usd == 0  # error answers release their reservations


async def test_timeouts_and_connection_errors_are_retried(metrics, sleeps) -> None:
    handler = Recorder(httpx.ReadTimeout("slow"), httpx.ConnectError("refused"), ok())
    client = make_client(handler, metrics)
    await client.complete(MESSAGES)
    assert sample(metrics, "convmon_judge_retries_total", cause="timeout") == 1
    assert sample(metrics, "convmon_judge_retries_total", cause="connection") == 1
    assert sample(metrics, "convmon_judge_requests_total", model="gpt-4o-mini", status="timeout") == 1


async def test_a_400_to_a_schema_falls_back_to_json_object_for_good(metrics, sleeps) -> None:
    handler = Recorder(error(400), ok("a"), ok("b"))
    client = make_client(handler, metrics)
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    first = await client.complete(MESSAGES, response_format=fmt)
    second = await client.complete(MESSAGES, response_format=fmt)
    bodies = handler.bodies()
    assert bodies[0]["response_format"] == fmt
    assert bodies[1]["response_format"] == bodies[2]["response_format"] == {"type": "json_object"}
    assert first.structured and second.structured and client.structured_ok
    assert client.formats.level("gpt-4o-mini") == 2
    assert sleeps == []  # a fallback, not a retry


async def test_a_400_to_json_object_too_falls_back_to_free_text_for_good(metrics, sleeps) -> None:
    handler = Recorder(error(400), error(400), ok("a"), ok("b"))
    client = make_client(handler, metrics)
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    first = await client.complete(MESSAGES, response_format=fmt)
    second = await client.complete(MESSAGES, response_format=fmt)
    bodies = handler.bodies()
    assert "response_format" in bodies[0] and bodies[1]["response_format"] == {"type": "json_object"}
    assert "response_format" not in bodies[2] and "response_format" not in bodies[3]
    assert not first.structured and not second.structured and not client.structured_ok
    assert sleeps == []


@pytest.mark.parametrize(
    ("status", "reason", "message"),
    [
        (401, "judge_auth", r"refused the credentials \(HTTP 401\); check OPENAI_API_KEY"),
        (404, "judge_not_found", r"has no model 'gpt-4o-mini' \(HTTP 404\)"),
        (422, "judge_bad_request", r"rejected the request \(HTTP 422\)"),
    ],
)
async def test_errors_a_retry_cannot_fix_fail_fast_without_leaking_the_key(
    metrics, sleeps, caplog, status: int, reason: str, message: str
) -> None:
    caplog.set_level(logging.DEBUG)
    client = make_client(Recorder(error(status)), metrics)
    with pytest.raises(JudgeError, match=message) as info:
        await client.complete(MESSAGES)
    assert info.value.reason == reason and sleeps == []
    assert API_KEY not in str(info.value) and API_KEY not in caplog.text
    assert info.value.__cause__ is None  # the openai error (with request details) is not chained


async def test_logprobs_rejected_by_the_endpoint(metrics) -> None:
    client = make_client(Recorder(error(400)), metrics)
    with pytest.raises(JudgeError, match=r"rejected a logprobs request") as info:
        await client.complete(MESSAGES, logprobs=True)
    assert info.value.reason == "judge_logprobs_unsupported"


async def test_budget_stops_accepting_once_spent(metrics) -> None:
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 0, "total_tokens": 1_000_000}
    client = make_client(Recorder(ok(usage=usage)), metrics, judge_daily_budget_usd=0.2, judge_tokens_per_minute=1e9)
    big = [{"role": "user", "content": "x" * 1_000_000}]  # bound: ~1M prompt tokens = $0.15
    assert client.accepting()
    await client.complete(big, max_tokens=16)  # costs $0.15 of $0.20
    assert not client.accepting()  # $0.05 left cannot cover a call like the last
    assert sample(metrics, "convmon_judge_budget_exhausted") == 1
    assert sample(metrics, "convmon_judge_budget_remaining_usd") == pytest.approx(0.05)
    with pytest.raises(BudgetExhausted, match=r"daily budget of \$0.20 is spent") as info:
        await client.complete(big, max_tokens=16)
    assert info.value.reason == "budget_exhausted"


async def test_concurrent_calls_reserve_worst_case_cost_and_cannot_overshoot(metrics) -> None:
    release = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return ok(usage={"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20})

    settings = Settings(openai_base_url="http://judge.test/v1", openai_api_key=API_KEY, judge_daily_budget_usd=0.001)
    client = JudgeClient(settings.judge, metrics, http_client=httpx.AsyncClient(transport=httpx.MockTransport(slow)))
    first = asyncio.create_task(client.complete(MESSAGES))  # reserves ~1500 output tokens = $0.0009
    await asyncio.sleep(0.01)
    with pytest.raises(BudgetExhausted):
        await client.complete(MESSAGES)
    release.set()
    await first
    assert client.budget.spent_usd == pytest.approx((10 * 0.15 + 10 * 0.6) / 1e6)


async def test_missing_usage_is_booked_at_the_bound(metrics) -> None:
    response = ok("x" * 300)
    body = json.loads(response.content)
    del body["usage"]
    client = make_client(Recorder(httpx.Response(200, json=body)), metrics)
    completion = await client.complete(MESSAGES)
    assert completion.usage.prompt == prompt_bound(MESSAGES) and completion.usage.completion == 1500
    assert completion.cost_usd == pytest.approx(client.budget.spent_usd) and completion.cost_usd > 0


async def test_a_usage_claim_above_the_bound_is_booked_at_the_bound(metrics) -> None:
    """One response claiming 1e9 tokens used to book $150 of the budget."""
    claim = {"prompt_tokens": 10**9, "completion_tokens": 10, "total_tokens": 10**9 + 10}
    client = make_client(Recorder(ok(usage=claim)), metrics)
    completion = await client.complete(MESSAGES)
    bound = client.cost("gpt-4o-mini", Usage(prompt=prompt_bound(MESSAGES), completion=10))
    assert completion.cost_usd == pytest.approx(bound) and bound < 0.01
    assert client.budget.spent_usd == pytest.approx(bound)
    assert sample(metrics, "convmon_judge_usage_capped_total", model="gpt-4o-mini") == 1
    assert sample(metrics, "convmon_judge_spend_usd_total", model="gpt-4o-mini") == pytest.approx(bound)


async def test_more_completion_tokens_than_asked_for_is_an_answer_too_large(metrics, sleeps) -> None:
    """The token cap: a server that ignored max_tokens is not read, counted, and booked at the bound."""
    claim = {"prompt_tokens": 10, "completion_tokens": 1501, "total_tokens": 1511}
    handler = Recorder(ok(usage=claim))
    client = make_client(handler, metrics)
    with pytest.raises(JudgeError, match=r"reported 1501 completion tokens for max_tokens=1500") as info:
        await client.complete(MESSAGES)
    assert info.value.reason == "judge_answer_too_large" and len(handler.requests) == 1 and sleeps == []
    assert sample(metrics, "convmon_judge_answers_too_large_total", limit="tokens") == 1
    bound = client.cost("gpt-4o-mini", Usage(prompt=prompt_bound(MESSAGES), completion=1500))
    assert client.budget.spent_usd == pytest.approx(bound)


async def test_reported_usage_below_the_bound_lowers_the_booking(metrics) -> None:
    client = make_client(Recorder(ok(usage={"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8})), metrics)
    await client.complete(MESSAGES)
    assert client.budget.spent_usd == pytest.approx((5 * 0.15 + 3 * 0.6) / 1e6)
    assert sample(metrics, "convmon_judge_budget_booked_usd_total") == pytest.approx((5 * 0.15 + 3 * 0.6) / 1e6)


def test_the_prompt_bound_counts_bytes_and_the_schema() -> None:
    messages = [{"role": "user", "content": "héllo"}]
    assert prompt_bound(messages) == 6 + 8 + 8  # 'é' is two bytes: a tokenizer-free upper bound
    schema = {"type": "json_schema", "json_schema": {"name": "x"}}
    assert prompt_bound(messages, schema) == prompt_bound(messages) + len(json.dumps(schema))


async def test_azure_uses_deployment_urls_and_api_key_header(metrics) -> None:
    handler = Recorder(ok())
    settings = Settings(openai_base_url="https://res.openai.azure.com", openai_api_key=API_KEY,
                        azure_api_version="2024-10-21", judge_model="my-deployment")
    client = JudgeClient(settings.judge, metrics, http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    await client.complete(MESSAGES)
    request = handler.requests[0]
    assert request.url.path == "/openai/deployments/my-deployment/chat/completions"
    assert request.url.params["api-version"] == "2024-10-21"
    assert request.headers["api-key"] == API_KEY
    assert client.provider == "azure"


def test_price_lookup_prefers_exact_then_longest_prefix() -> None:
    prices = {"gpt-4o": (2.5, 10.0), "gpt-4o-mini": (0.15, 0.6)}
    assert price_for("gpt-4o-mini", prices) == (0.15, 0.6)
    assert price_for("gpt-4o-mini-2024-07-18", prices) == (0.15, 0.6)
    assert price_for("gpt-4o-2024-08-06", prices) == (2.5, 10.0)
    assert price_for("llama3", prices) is None


def test_unknown_model_price_is_warned_about(metrics, caplog) -> None:
    caplog.set_level(logging.WARNING)
    make_client(Recorder(ok()), metrics, judge_model="llama3:8b")
    assert "no price for judge model 'llama3:8b'" in caplog.text


def test_retry_after_formats() -> None:
    assert retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    assert retry_after(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert retry_after(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after(httpx.Headers({})) is None


@pytest.mark.parametrize(
    "body", [b"", b"not json", b"0", b'{"choices": []}', b'{"choices": [{"message": {"content": 5}}]}']
)
async def test_a_200_that_is_not_a_completion_is_retried_then_reported(metrics, sleeps, body: bytes) -> None:
    response = httpx.Response(200, content=body, headers={"content-type": "application/json"})
    client = make_client(Recorder(response), metrics, judge_max_retries=1)
    message = r"failed 2 times .* \(last: bad response body\); giving up: is openai_base_url"
    with pytest.raises(JudgeError, match=message) as info:
        await client.complete(MESSAGES)
    assert info.value.reason == "judge_bad_response"
    assert sample(metrics, "convmon_judge_retries_total", cause="bad_response") == 1


async def test_malformed_usage_is_billed_from_the_estimate(metrics) -> None:
    client = make_client(Recorder(ok(usage={"prompt_tokens": "12", "completion_tokens": None})), metrics)  # type: ignore[dict-item]
    completion = await client.complete(MESSAGES)
    assert completion.usage.prompt > 12 and completion.cost_usd > 0
