"""Failure paths of judge calls: a cut-off answer is never used, and one fatal error stops the rest."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from monitor.contracts.errors import JudgeError
from monitor.judge.client import JudgeClient
from monitor.judge.gather import gather_or_cancel
from monitor.judge.logprobs import LogprobsScorer
from monitor.tools.openai_server import OpenAIServer
from monitor.tools.stand_in_judge import answer
from tests.support.judge_wiring import judge_from, make_conversation

HAPPY = make_conversation("Please write a haiku", "Leaves drift...", "Thanks, that's perfect!")


def whole_answer_cut_off(body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    """A complete, parseable SPUR answer that the server nevertheless reports as stopped at the limit."""
    text, _ = answer(body)
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
    return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"], "choices": [choice],
                 "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}}, {}


async def test_a_cut_off_answer_that_parses_is_still_not_used(make_settings, rubric, metrics, server) -> None:
    server.script(whole_answer_cut_off)
    judge = judge_from(make_settings(), rubric, metrics)
    record = await judge.score(HAPPY)
    await judge.aclose()
    assert len(server.requests) == 2  # the cut-off answer was not used: a repair prompt followed
    repair = server.requests[1]["messages"][-1]["content"]
    assert "cut off at the output limit" in repair
    assert record.R > 0


async def test_a_fatal_logprobs_error_cancels_the_sibling_calls(make_settings, rubric, metrics, caplog) -> None:
    # the first request to arrive is refused (401, fatal); the other items' requests are slow and then
    # keep failing (500, retryable): siblings left running would retry against the closed client
    with OpenAIServer(slow_s=1.0, default="500") as server:
        server.script("401", *["slow"] * 20)
        settings = make_settings(openai_base_url=server.url, judge_max_retries=5, judge_backoff_base_s=0.05,
                                 judge_backoff_max_s=0.05)
        client = JudgeClient(settings.judge, metrics)
        scorer = LogprobsScorer(settings.judge, settings.rubrics, client, metrics, list(rubric.items),
                                model="gpt-4o-mini")
        caplog.set_level(logging.WARNING, logger="monitor.judge.client")
        with pytest.raises(JudgeError, match="refused the credentials"):
            await scorer.score_items(HAPPY)
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []  # nothing left running
        await client.aclose()
        await asyncio.sleep(1.5)  # longer than the slow answers: a live sibling would have retried by now
        # each item asked once: no retry. (Not "no request after the cancel": under load a request sent before it
        # reached the server's thread after it.)
        prompts = [str(body["messages"]) for body in server.requests]
        assert len(set(prompts)) == len(prompts) <= len(rubric.items), len(prompts)
        assert not [r for r in caplog.records if "retry" in r.getMessage()]


async def test_gather_or_cancel_returns_results_in_order_and_raises_the_error_itself() -> None:
    async def value(x: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return x

    assert await gather_or_cancel(value(i, 0.01 * (3 - i)) for i in range(3)) == [0, 1, 2]
    finished: list[int] = []

    async def slow() -> int:
        await asyncio.sleep(5)
        finished.append(1)
        return 1

    async def boom() -> int:
        raise JudgeError("fatal", reason="judge_auth")

    with pytest.raises(JudgeError, match="fatal") as caught:
        await gather_or_cancel([slow(), boom(), slow()])
    assert type(caught.value) is JudgeError and finished == []  # the error itself, not an ExceptionGroup

