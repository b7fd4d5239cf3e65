"""Judge answers larger than judge_max_answer_bytes are refused unread, counted and dead-lettered.

Real HTTP: the test server pads a valid completion with whitespace (still one JSON document, which the old
client accepted), with a Content-Length and chunked without one.
"""

from __future__ import annotations

import pytest

from monitor.contracts.errors import JudgeError
from monitor.judge.build import build_judge
from tests.support.judge_wiring import make_conversation, sample

HAPPY = make_conversation("Can you fix my code?", "Here is the fix.", "Thanks, that works perfectly!")


def judge_from(settings, rubric, metrics):
    return build_judge(settings.judge, settings.rubrics, rubric, metrics, ledger_url=settings.label_store_url)


@pytest.mark.parametrize("behaviour", ["padded", "padded_chunked"])
async def test_a_padded_answer_is_refused_unread(make_settings, rubric, metrics, server, behaviour) -> None:
    server.padded_bytes = 8_000_000
    server.default = behaviour
    judge = judge_from(make_settings(judge_max_answer_bytes=65_536), rubric, metrics)
    with pytest.raises(JudgeError, match=r"more than judge_max_answer_bytes=65536; refused unread") as info:
        await judge.score(HAPPY)
    assert info.value.reason == "judge_answer_too_large"
    assert len(server.requests) == 1  # neither retried nor repaired
    assert sample(metrics, "convmon_judge_answers_too_large_total", limit="bytes") == 1
    assert sample(metrics, "convmon_judge_requests_total", model="gpt-4o-mini", status="too_large") == 1
    await judge.aclose()


async def test_an_answer_under_the_cap_is_read(make_settings, rubric, metrics, server) -> None:
    server.padded_bytes = 30_000
    server.default = "padded"
    judge = judge_from(make_settings(judge_max_answer_bytes=65_536), rubric, metrics)
    record = await judge.score(HAPPY)
    assert any(item.verdict for item in record.items)
    assert sample(metrics, "convmon_judge_answers_too_large_total", limit="bytes") == 0
    await judge.aclose()
