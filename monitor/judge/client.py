"""The one way convmon talks to an OpenAI-compatible chat endpoint: ``JudgeClient.complete``.

Every call is bounded (``judge_concurrency``), rate limited (requests and tokens per minute),
budgeted (each attempt reserves its worst case against the cluster-wide daily USD budget before it
is sent: prompt bytes plus ``max_tokens`` at the model's price, a bound no tokenizer is needed
for; reported usage may lower the booking, never raise it), metered (requests by status,
latency, tokens, spend) and retried here rather than inside the openai client (its
``max_retries=0``): 429, 408/409, 5xx, timeouts and connection errors back off exponentially with
jitter, honouring ``Retry-After``, and end in :class:`JudgeUnavailable`. A refused ``response_format``
steps down :class:`monitor.judge.formats.FormatLadder` (rules schema, plain schema, ``json_object``, free
text), remembered per model once a lower level works. Secrets and conversation text never reach logs or
exception messages.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import TYPE_CHECKING, Any

from monitor.contracts.errors import JudgeError, JudgeUnavailable
from monitor.contracts.metrics import Metrics
from monitor.contracts.sections import JudgeSettings
from monitor.judge.answer_cap import AnswerTooLarge, cap_answers
from monitor.judge.budget import DailyBudget
from monitor.judge.completion import (
    BadResponse,
    Completion,
    Usage,
    choice_logprobs,
    price_for,
    prompt_bound,
    reported_usage,
)
from monitor.judge.formats import TEXT, FormatLadder, Rung, endpoint_label
from monitor.judge.ledger import BudgetLedger
from monitor.judge.ratelimit import RateLimiter
from monitor.judge.statuses import classify

if TYPE_CHECKING:  # the openai package (its types: ~1 s of CPU) is imported when a client is made
    import httpx
    import openai

log = logging.getLogger(__name__)
_MAX_RETRY_AFTER_S = 300.0


class JudgeClient:
    """Retrying, rate-limited, budgeted, metered chat completions (shared by judge modes and juries)."""

    def __init__(
        self,
        settings: JudgeSettings,
        metrics: Metrics,
        *,
        http_client: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
        ledger: BudgetLedger | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.provider = "azure" if settings.azure_api_version else "openai"
        self.endpoint = endpoint_label(settings.openai_base_url)
        self.formats = FormatLadder(metrics, self.endpoint, enabled=settings.judge_structured_output)
        self._rng = rng or random.Random()
        self._sem = asyncio.Semaphore(settings.judge_concurrency)
        self._limiter = RateLimiter(
            requests_per_minute=settings.judge_requests_per_minute, tokens_per_minute=settings.judge_tokens_per_minute
        )
        self.budget = DailyBudget(settings.judge_daily_budget_usd, ledger=ledger, metrics=metrics)
        self._openai = self._make_openai(settings, http_client)
        for model in {settings.judge_model, *settings.judge_models}:
            if price_for(model, settings.judge_prices) is None:
                log.warning(
                    "no price for judge model %r in judge_prices: its spend counts as $0 and the daily budget "
                    "cannot limit it (set CONVMON_JUDGE_PRICES)", model
                )

    @staticmethod
    def _make_openai(settings: JudgeSettings, given: httpx.AsyncClient | None) -> openai.AsyncOpenAI:
        import openai

        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else "unused"
        http_client = given if given is not None else openai.DefaultAsyncHttpxClient()  # openai's defaults
        cap_answers(http_client, settings.judge_max_answer_bytes)
        common: dict[str, Any] = {
            "api_key": key, "max_retries": 0, "timeout": settings.judge_timeout_s, "http_client": http_client
        }
        if settings.azure_api_version and settings.openai_base_url:
            return openai.AsyncAzureOpenAI(
                azure_endpoint=settings.openai_base_url, api_version=settings.azure_api_version, **common
            )
        return openai.AsyncOpenAI(base_url=settings.openai_base_url, **common)

    @property
    def structured_ok(self) -> bool:
        """Whether the configured model still gets a ``response_format`` (a JSON schema or ``json_object``)."""
        return self.formats.level(self.settings.judge_model) < TEXT

    def accepting(self) -> bool:
        return self.budget.accepting()

    def on_pace(self) -> bool:
        return self.budget.on_pace()

    async def aclose(self) -> None:
        await self._openai.close()

    def cost(self, model: str, usage: Usage) -> float:
        """USD for a call; cached prompt tokens are charged in full (an upper bound for budgets)."""
        price = price_for(model, self.settings.judge_prices)
        if price is None:
            return 0.0
        return (usage.prompt * price[0] + usage.completion * price[1]) / 1_000_000

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        model: str | None = None,
        response_format: dict[str, Any] | None = None,
        plain_format: dict[str, Any] | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """One chat completion; raises ``BudgetExhausted``, ``JudgeUnavailable`` or ``JudgeError``.

        ``response_format`` is the preferred schema; ``plain_format`` a simpler one to try when the endpoint
        refuses it, before free text (see :mod:`monitor.judge.formats`)."""
        model = model or self.settings.judge_model
        max_tokens = max_tokens or self.settings.judge_max_output_tokens
        request: dict[str, Any] = {
            "model": model, "messages": messages, "max_tokens": max_tokens,
            "temperature": self.settings.judge_temperature,
        }
        if logprobs:
            request.update(logprobs=True, top_logprobs=top_logprobs or 20)
        return await self._with_retries(request, self.formats.tries(model, response_format, plain_format))

    async def _with_retries(self, request: dict[str, Any], tries: list[Rung]) -> Completion:
        import openai  # loaded by _make_openai already: a dictionary look-up

        model = request["model"]
        rung = 0
        level, bound = self._use_format(request, tries[rung])
        attempts = self.settings.judge_max_retries + 1
        last = "none"
        attempt = 0
        all_formatted = True  # every failed attempt carried response_format: the give-up message says so
        while attempt < attempts:
            tokens = bound + request["max_tokens"]
            await self._limiter.acquire(tokens)
            async with self._sem:
                # the worst case is booked before the request leaves; only a usable answer lowers it, and
                # an attempt that timed out or lost its connection stays booked (it may have been billed)
                reservation = await self.budget.reserve(self.cost(model, Usage(prompt=bound,
                                                                               completion=request["max_tokens"])))
                billed: float | None = None  # None: keep the reservation
                started = time.perf_counter()
                self.metrics.judge_in_flight.inc()
                try:
                    response = await self._openai.chat.completions.create(**request)
                except openai.APIStatusError as exc:
                    billed = 0.0  # the server answered with an error: nothing to pay for
                    status, cause, wait = classify(exc, request, self.metrics)
                    if status == "format_rejected" and rung + 1 < len(tries):
                        self.metrics.judge_requests.labels(model, status).inc()
                        rung += 1
                        level, bound = self._use_format(request, tries[rung])
                        continue  # not a retry: the same request one level down, at most twice
                    last = cause or status
                except AnswerTooLarge as exc:  # never retried: the same server would pad the next answer too
                    self.metrics.judge_answers_too_large.labels(exc.limit).inc()
                    self.metrics.judge_requests.labels(model, "too_large").inc()
                    raise
                except openai.APITimeoutError:
                    status, cause, wait, last = "timeout", "timeout", None, "timeout"
                except openai.APIConnectionError:
                    status, cause, wait, last = "connection_error", "connection", None, "connection error"
                except ValueError:  # a 200 whose body is not JSON (proxies, half-compatible servers)
                    status, cause, wait, last = "bad_response", "bad_response", None, "bad response body"
                else:
                    try:
                        completion = self._record(request, response, time.perf_counter() - started, bound)
                        billed = completion.cost_usd
                        if tries[0][1] is not None:  # only a request that offered a format says what works
                            self.formats.remember(model, level)
                        return completion
                    except AnswerTooLarge as exc:
                        self.metrics.judge_answers_too_large.labels(exc.limit).inc()
                        self.metrics.judge_requests.labels(model, "too_large").inc()
                        raise
                    except BadResponse:
                        status, cause, wait, last = "bad_response", "bad_response", None, "bad response body"
                finally:
                    self.metrics.judge_in_flight.dec()
                    self.metrics.judge_latency.labels(model).observe(time.perf_counter() - started)
                    booked = await self.budget.settle(reservation, reservation.usd if billed is None else billed)
                    self.metrics.judge_spend.labels(model).inc(booked)
            self.metrics.judge_requests.labels(model, status).inc()
            all_formatted = all_formatted and "response_format" in request
            attempt += 1
            if status == "timeout" and not self.settings.judge_retry_timeouts:
                raise JudgeUnavailable(
                    f"the judge endpoint did not answer within judge_timeout_s={self.settings.judge_timeout_s:g}s "
                    f"for model {model!r}; not retried (judge_retry_timeouts=false: a single-stream server would "
                    "still be computing the abandoned request)")
            if attempt >= attempts:
                break
            delay = self._delay(attempt, wait)
            self.metrics.judge_retries.labels(cause).inc()
            log.warning("judge %s: %s, retry %d/%d in %.2fs", model, last, attempt, attempts - 1, delay)
            await asyncio.sleep(delay)
        message = f"the judge endpoint failed {attempts} times for model {model!r} (last: {last}); giving up"
        if last == "bad response body":
            raise JudgeError(message + ": is openai_base_url an OpenAI-compatible API?", reason="judge_bad_response")
        if all_formatted:
            message += ("; every attempt carried a JSON-schema response_format: if this endpoint cannot answer "
                        "with one, set CONVMON_JUDGE_STRUCTURED_OUTPUT=false")
        raise JudgeUnavailable(message + " (judge_max_retries)")

    def _use_format(self, request: dict[str, Any], rung: Rung) -> tuple[int, int]:
        """Put one rung's response_format on the request; returns (level, prompt token bound)."""
        level, fmt = rung
        request.pop("response_format", None)
        if fmt is not None:
            request["response_format"] = fmt
        return level, prompt_bound(request["messages"], fmt)

    def _delay(self, attempt: int, server_wait: float | None) -> float:
        """Retry-After when the server gives one, else exponential backoff with equal jitter."""
        if server_wait is not None:
            return float(min(server_wait, _MAX_RETRY_AFTER_S))
        ceiling = min(self.settings.judge_backoff_max_s, self.settings.judge_backoff_base_s * 2 ** (attempt - 1))
        return float(ceiling / 2 + self._rng.uniform(0, ceiling / 2))

    def _record(self, request: dict[str, Any], response: Any, latency: float, bound: int) -> Completion:
        """Meter a response and turn it into a ``Completion``; raise ``BadResponse`` if it is not one.

        Reported usage is capped at the local bound (prompt bytes, ``max_tokens``): a server claiming
        more is counted in ``convmon_judge_usage_capped_total`` and booked at the bound.
        """
        model = request["model"]
        try:
            choice = response.choices[0]
            text = choice.message.content or ""
            finish_reason = choice.finish_reason
            top = choice_logprobs(choice)
            if not isinstance(text, str) or not (finish_reason is None or isinstance(finish_reason, str)):
                raise TypeError("content or finish_reason of the wrong type")
        except (AttributeError, TypeError, IndexError, KeyError, ValueError) as exc:
            raise BadResponse(type(exc).__name__) from None
        ceiling = Usage(prompt=bound, completion=request["max_tokens"])
        reported = reported_usage(response)
        if reported is not None and reported.completion > ceiling.completion:
            raise AnswerTooLarge(
                f"the judge endpoint reported {reported.completion} completion tokens for max_tokens="
                f"{ceiling.completion}: it did not honour the limit, so its answer is not read "
                "(judge_max_output_tokens)", limit="tokens")
        if reported is not None and reported.prompt > ceiling.prompt:
            self.metrics.judge_usage_capped.labels(model).inc()
            log.warning("judge %s reported more tokens than the request can use (%d prompt, %d completion > "
                        "bound %d, %d); booked at the bound", model, reported.prompt, reported.completion,
                        ceiling.prompt, ceiling.completion)
        usage = Usage(prompt=min(reported.prompt, ceiling.prompt), completion=min(reported.completion,
                      ceiling.completion), cached=min(reported.cached, ceiling.prompt)) if reported else ceiling
        cost = self.cost(model, usage)
        m = self.metrics
        m.judge_requests.labels(model, "ok").inc()
        for kind, value in usage.as_dict().items():
            m.judge_tokens.labels(model, kind).inc(value)
        self._limiter.settle(bound + request["max_tokens"], usage.prompt + usage.completion)
        return Completion(
            text=text,
            model=model,
            finish_reason=finish_reason,
            usage=usage,
            cost_usd=cost,
            latency_s=latency,
            response_model=model_name if isinstance(model_name := getattr(response, "model", None), str) else None,
            structured="response_format" in request,
            top_logprobs=top,
        )

