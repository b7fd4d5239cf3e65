"""End to end through build_judge against the real test HTTP server (tests/openai_server.py)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from monitor.contracts.errors import JudgeError, JudgeResponseError, JudgeUnavailable
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import aggregate_r
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.judge.llm import LLMJudge
from monitor.judge.simulated import SimulatedJudge
from tests.support.judge_wiring import API_KEY, judge_from, make_conversation, sample

HAPPY = make_conversation(
    "Please write a haiku about autumn, I'm at jane@example.com",
    "Leaves drift on cold wind...",
    "Thanks, that's perfect!",
)


def yes(record) -> set[str]:
    return {i.item_id for i in record.items if i.verdict}


async def test_spur_structured_answer_fills_the_record(make_settings, rubric, metrics, server) -> None:
    judge = judge_from(make_settings(), rubric, metrics)
    record = await judge.score(HAPPY)
    assert isinstance(judge, LLMJudge) and judge.name == "openai:gpt-4o-mini"
    assert yes(record) == {"sat.gratitude", "sat.praise", "sat.no_frustration", "sat.task_request"}
    assert record.R == aggregate_r(record.items) > 0
    assert [i.item_id for i in record.items] == rubric.item_ids
    assert (record.scorer, record.judge, record.model_version) == ("llm", "openai:gpt-4o-mini", "gpt-4o-mini")
    assert (record.rubric_set, record.rubric_version) == ("spur-copilot", "2")
    assert record.tokens["prompt"] > 0 and record.tokens["completion"] > 0 and record.cost_usd > 0
    assert record.latency_s > 0
    body = server.requests[0]
    assert body["response_format"]["json_schema"]["strict"] is True
    assert set(body["response_format"]["json_schema"]["schema"]["required"]) == set(rubric.item_ids)
    assert "jane@example.com" not in json.dumps(server.requests) and "[EMAIL]" in json.dumps(server.requests)
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    await judge.aclose()


async def test_second_call_reports_cached_prefix_tokens(make_settings, rubric, metrics) -> None:
    judge = judge_from(make_settings(), rubric, metrics)
    await judge.score(HAPPY)
    record = await judge.score(make_conversation("something else entirely"))
    assert record.tokens["cached"] > 0
    assert sample(metrics, "convmon_judge_tokens_total", model="gpt-4o-mini", kind="cached") > 0


async def test_free_text_answers_are_parsed(make_settings, rubric, metrics, server) -> None:
    server.script("text")
    settings = make_settings(judge_structured_output=False, judge_answer_repair="lenient")
    record = await judge_from(settings, rubric, metrics).score(HAPPY)
    assert "response_format" not in server.requests[0]
    assert sample(metrics, "convmon_judge_answer_repairs_total", kind="lenient") == 1
    assert yes(record) == {"sat.gratitude", "sat.praise", "sat.no_frustration", "sat.task_request"}


async def test_endpoint_rejecting_response_format_falls_back(make_settings, rubric, metrics, server) -> None:
    server.default = "reject_format"  # then answers in free text: the tolerant parser must be configured
    record = await judge_from(make_settings(judge_answer_repair="lenient"), rubric, metrics).score(HAPPY)
    names = [r.get("response_format", {}).get("json_schema", {}).get("name") or r.get("response_format", {}).get(
        "type") for r in server.requests]
    assert names == ["rubric_answers", "rubric_answers_plain", "json_object", None]  # rules, plain, any object, text
    assert "sat.gratitude" in yes(record)


@pytest.mark.parametrize("bad", ["malformed", "missing", "truncated"])
async def test_a_bad_answer_gets_one_repair_prompt(make_settings, rubric, metrics, server, bad: str) -> None:
    server.script(bad, "good")
    record = await judge_from(make_settings(), rubric, metrics).score(HAPPY)
    assert "sat.gratitude" in yes(record)
    repair = server.requests[1]["messages"]
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
    assert "could not be used" in repair[-1]["content"]
    if bad == "truncated":
        assert "cut off at the output limit" in repair[-1]["content"]
    if bad == "missing":
        assert "missing items dsat.sudden_end, dsat.lack_diversity" in repair[-1]["content"]
    assert sample(metrics, "convmon_judge_repairs_total", outcome="ok") == 1
    assert sample(metrics, "convmon_judge_parse_failures_total") == 1
    assert record.tokens["prompt"] > 0 and len(server.requests) == 2


async def test_two_bad_answers_raise_for_the_dead_letter_topic(make_settings, rubric, metrics, server) -> None:
    server.script("malformed", "missing")
    message = r"after a repair prompt, judge answer unusable: missing items"
    with pytest.raises(JudgeResponseError, match=message) as info:
        await judge_from(make_settings(), rubric, metrics).score(HAPPY)
    assert info.value.reason == "judge_unparseable"
    assert sample(metrics, "convmon_judge_repairs_total", outcome="failed") == 1
    assert sample(metrics, "convmon_judge_parse_failures_total") == 2


async def test_rate_limits_and_server_errors_are_retried(make_settings, rubric, metrics, server) -> None:
    server.script("429", "500", "503", "good")
    record = await judge_from(make_settings(), rubric, metrics).score(HAPPY)
    assert "sat.gratitude" in yes(record) and len(server.requests) == 4
    assert sample(metrics, "convmon_judge_retries_total", cause="429") == 1
    assert sample(metrics, "convmon_judge_retries_total", cause="5xx") == 2


async def test_retry_budget_exhausted_raises_judge_unavailable(make_settings, rubric, metrics, server) -> None:
    server.default = "500"
    with pytest.raises(JudgeUnavailable, match=r"failed 3 times .* \(last: 5xx\)"):
        await judge_from(make_settings(judge_max_retries=2), rubric, metrics).score(HAPPY)
    assert len(server.requests) == 3


async def test_slow_endpoint_times_out_and_is_retried(make_settings, rubric, metrics, server) -> None:
    server.slow_s = 1.0
    server.script("slow", "good")
    record = await judge_from(make_settings(judge_timeout_s=0.2), rubric, metrics).score(HAPPY)
    assert "sat.gratitude" in yes(record)
    assert sample(metrics, "convmon_judge_retries_total", cause="timeout") == 1


async def test_likert_mode_batches_at_most_ten_items(make_settings, rubric, metrics, server) -> None:
    record = await judge_from(make_settings(judge_mode="likert"), rubric, metrics).score(HAPPY)
    assert len(server.requests) == 2
    for body in server.requests:
        assert len(body["response_format"]["json_schema"]["schema"]["required"]) == 10
    scores = {i.item_id: i.score for i in record.items}
    assert scores["sat.praise"] == 7.5  # server: "agree" (4) for one keyword hit ("perfect")
    assert scores["sat.gratitude"] == 10.0  # "strongly agree" (5) for two ("thank", "thanks")
    assert {i.score for i in record.items if not i.verdict} == {2.5}
    dsat = sum(i.score for i in record.items if i.polarity == "dsat")
    sat = sum(i.score for i in record.items if i.polarity == "sat")
    assert pytest.approx(sat - dsat) == record.R


async def test_logprobs_mode_records_probability_and_mass(make_settings, rubric, metrics, server) -> None:
    record = await judge_from(make_settings(judge_mode="logprobs"), rubric, metrics).score(HAPPY)
    assert len(server.requests) == len(rubric.items)
    assert all(body["logprobs"] and body["top_logprobs"] == 20 and body["max_tokens"] == 1 for body in server.requests)
    gratitude = next(i for i in record.items if i.item_id == "sat.gratitude")
    assert gratitude.probability == pytest.approx(0.9 / 0.95) and gratitude.mass == pytest.approx(0.95)
    repetition = next(i for i in record.items if i.item_id == "dsat.repetition")
    assert repetition.probability == pytest.approx(0.15 / 0.95) and repetition.verdict is False
    assert pytest.approx(aggregate_r(record.items)) == record.R


async def test_logprobs_mode_without_logprobs_from_the_endpoint(make_settings, rubric, metrics, server) -> None:
    server.default = "no_logprobs"
    with pytest.raises(JudgeError, match=r"returned no logprobs for model 'gpt-4o-mini'") as info:
        await judge_from(make_settings(judge_mode="logprobs"), rubric, metrics).score(HAPPY)
    assert info.value.reason == "judge_logprobs_unsupported"


async def test_maxims_rubric(make_settings, metrics, server) -> None:
    maxims = load_rubric_set("maxims", REPO_ROOT / "prompts")
    record = await judge_from(make_settings(), maxims, metrics).score(make_conversation("This is useless and wrong"))
    assert {i.verdict for i in record.items} == {False} and record.R == 0
    assert "CONVERSATIONAL MAXIMS" in server.requests[0]["messages"][0]["content"]


async def test_jury_of_two_models_marks_disagreements_uncertain(make_settings, rubric, metrics, server) -> None:
    def contrarian(body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        from monitor.tools.stand_in_judge import answer

        text, _ = answer(body)
        if body["model"] == "gpt-4.1-mini":  # this juror never sees gratitude
            data = json.loads(text)
            data["sat.gratitude"] = {**data["sat.gratitude"], "answer": "N", "score": 0}
            text = json.dumps(data)
        return 200, {"id": "j", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}],
                     "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}, {}

    server.default = contrarian
    settings = make_settings(judge_models=["gpt-4o-mini", "gpt-4.1-mini"])
    judge = judge_from(settings, rubric, metrics)
    record = await judge.score(HAPPY)
    assert record.judge == "jury:2" and record.model_version == "gpt-4o-mini,gpt-4.1-mini"
    gratitude = next(i for i in record.items if i.item_id == "sat.gratitude")
    assert gratitude.uncertain and gratitude.verdict is None and gratitude.score is None
    assert yes(record) == {"sat.praise", "sat.no_frustration", "sat.task_request"}
    assert sample(metrics, "convmon_jury_disagreements_total", rubric="sat.gratitude") == 1
    assert record.tokens["prompt"] == 200
    assert sorted(b["model"] for b in server.requests) == ["gpt-4.1-mini", "gpt-4o-mini"]


async def test_single_model_jury_permutes_rubric_order(make_settings, rubric, metrics, server) -> None:
    record = await judge_from(make_settings(judge_jury_size=3), rubric, metrics).score(HAPPY)
    systems = [b["messages"][0]["content"] for b in server.requests]
    assert len(systems) == 3 and len(set(systems)) == 3
    assert record.judge == "jury:3" and record.model_version == "gpt-4o-minix3"
    assert not any(i.uncertain for i in record.items)  # a deterministic server always agrees with itself


async def test_unconfigured_judge_is_the_simulator(rubric, metrics) -> None:
    judge = judge_from(Settings(), rubric, metrics)
    assert isinstance(judge, SimulatedJudge) and judge.name == "simulated"


async def test_no_conversation_text_or_key_in_info_logs(make_settings, rubric, metrics, server, caplog) -> None:
    caplog.set_level(logging.INFO)
    server.script("429", "malformed", "good")
    await judge_from(make_settings(), rubric, metrics).score(HAPPY)
    assert "haiku" not in caplog.text and API_KEY not in caplog.text
    assert "retry 1/3" in caplog.text
