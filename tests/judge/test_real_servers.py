"""The judge against the refusals and answers of real OpenAI-compatible servers, over real HTTP.

Each flavour of the test server (monitor/tools/server_flavours.py) answers as that server's source says it
does: llama-cpp-python's 500 for a json_schema response_format, old llama-server's 500, today's llama-server /
vLLM / Ollama refusing a schema their grammar backend cannot compile, FastAPI's 422. The judge must end with a
score every time, pay for each refusal once per model, and say where it fell back to.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from monitor.contracts.errors import JudgeError, JudgeResponseError, JudgeUnavailable
from monitor.judge.build import build_judge
from monitor.judge.formats import endpoint_label, refuses_format
from monitor.judge.spur import spur_schema
from monitor.judge.strict import validate
from tests.support.judge_wiring import make_conversation, sample

HAPPY = make_conversation("Can you fix my code?", "Here is the fix.", "Thanks, that works perfectly!")


def judge_from(settings, rubric, metrics):
    return build_judge(settings.judge, settings.rubrics, rubric, metrics, ledger_url=settings.label_store_url)


def formats_sent(server) -> list[str | None]:
    """Per request: the JSON schema's name, ``json_object``, or None (free text)."""
    formats = [r.get("response_format") or {} for r in server.requests]
    return [f.get("json_schema", {}).get("name") or (f.get("type") if f else None) for f in formats]


# (flavour, what the first conversation sends, what later ones start at, the remembered level)
ANY = "json_object"
MATRIX = [
    ("good", ["rubric_answers"], ["rubric_answers"], 0),
    ("llama_cpp_python", ["rubric_answers", "rubric_answers_plain", ANY], [ANY], 2),
    ("llama_server_old", ["rubric_answers", "rubric_answers_plain", ANY], [ANY], 2),
    ("llama_server_no_rules", ["rubric_answers", "rubric_answers_plain"], ["rubric_answers_plain"], 1),
    ("vllm_no_rules", ["rubric_answers", "rubric_answers_plain"], ["rubric_answers_plain"], 1),
    ("ollama_no_rules", ["rubric_answers", "rubric_answers_plain"], ["rubric_answers_plain"], 1),
    ("fastapi_422", ["rubric_answers", "rubric_answers_plain", ANY, None], [None], 3),
]


@pytest.mark.parametrize(("flavour", "first", "later", "level"), MATRIX, ids=[m[0] for m in MATRIX])
async def test_each_server_ends_with_a_score_and_pays_for_its_refusal_once(
    make_settings, rubric, metrics, server, flavour, first, later, level
) -> None:
    server.default = flavour
    judge = judge_from(make_settings(judge_answer_repair="lenient"), rubric, metrics)  # free text must parse
    record = await judge.score(HAPPY)
    assert formats_sent(server) == first
    assert any(item.verdict for item in record.items)
    server.requests.clear()
    await judge.score(make_conversation("hello", "hi", "thanks!", conversation_id="c-2"))
    assert formats_sent(server) == later  # remembered: no second refusal
    labels = {"endpoint": f"127.0.0.1:{server.port}", "model": "gpt-4o-mini"}
    assert sample(metrics, "convmon_judge_structured_fallback", **labels) == level
    assert sample(metrics, "convmon_judge_retries_total", cause="5xx") == 0  # a refusal is not retried
    await judge.aclose()


async def test_a_plain_5xx_is_retried_and_the_give_up_names_the_setting(make_settings, rubric, metrics, server) -> None:
    server.default = "500"  # a body that names no format: an outage, retried
    judge = judge_from(make_settings(judge_max_retries=1), rubric, metrics)
    with pytest.raises(JudgeUnavailable, match=r"every attempt carried a JSON-schema response_format.*"
                                               r"CONVMON_JUDGE_STRUCTURED_OUTPUT=false"):
        await judge.score(HAPPY)
    assert formats_sent(server) == ["rubric_answers", "rubric_answers"]
    await judge.aclose()


async def test_a_400_that_is_not_about_the_format_is_not_remembered(make_settings, rubric, metrics, server) -> None:
    server.script("400", "400", "400", "400")  # every rung refused: it was never the format
    judge = judge_from(make_settings(), rubric, metrics)
    with pytest.raises(JudgeError, match=r"rejected the request \(HTTP 400\)") as info:
        await judge.score(HAPPY)
    assert info.value.reason == "judge_bad_request"
    assert formats_sent(server) == ["rubric_answers", "rubric_answers_plain", ANY, None]
    assert judge.client.formats.level("gpt-4o-mini") == 0 and judge.client.structured_ok
    await judge.aclose()


def test_refusals_are_recognised_by_status_and_body() -> None:
    assert refuses_format(400, "") and refuses_format(422, "{}")
    assert refuses_format(500, "Input should be 'text' or 'json_object' ('body', 'response_format', 'type')")
    assert refuses_format(500, "JSON schema conversion failed")
    assert not refuses_format(500, "CUDA out of memory") and not refuses_format(429, "response_format")
    assert endpoint_label("http://user:secret@llm.internal:8080/v1") == "llm.internal:8080"
    assert endpoint_label(None) == "api.openai.com"


def test_the_rules_schema_says_what_the_validator_demands(rubric) -> None:
    schema = spur_schema(list(rubric.items))["json_schema"]["schema"]
    sat = next(i.id for i in rubric.items if i.polarity == "sat")
    item = schema["properties"][sat]
    assert [b["properties"]["answer"]["enum"] for b in item["anyOf"]] == [["Y"], ["N"]]
    assert [(b["properties"]["score"]["minimum"], b["properties"]["score"]["maximum"]) for b in item["anyOf"]] == [
        (1, 10), (0, 0)]
    answers = {i.id: {"answer": "N", "score": 0} for i in rubric.items if i.polarity != "maxim"}
    answers |= {i.id: {"answer": "S", "score": 0} for i in rubric.items if i.polarity == "maxim"}
    assert validate(answers, schema) == []
    problems = validate({**answers, sat: {"answer": "Y", "score": 0}}, schema)  # a Y scored 0: off the schema
    assert problems == [("bad_value", f"{sat}.score is 0, below the minimum 1")]
    assert validate({**answers, sat: {"answer": "N", "score": 4}}, schema) == [
        ("bad_value", f"{sat}.score is 4, above the maximum 0")]
    plain = spur_schema(list(rubric.items), rules=False)["json_schema"]["schema"]
    assert "anyOf" not in json.dumps(plain) and "minimum" not in json.dumps(plain)


async def test_no_repair_prompt_at_temperature_zero_unless_asked(make_settings, rubric, metrics, server) -> None:
    server.script("malformed")
    judge = judge_from(make_settings(judge_repair_prompt="auto"), rubric, metrics)
    with pytest.raises(JudgeResponseError):
        await judge.score(HAPPY)
    assert len(server.requests) == 1
    assert sample(metrics, "convmon_judge_repairs_total", outcome="skipped") == 1
    hot = judge_from(make_settings(judge_repair_prompt="auto", judge_temperature=0.7), rubric, metrics)
    server.script("malformed", "good")
    await hot.score(HAPPY)
    assert len(server.requests) == 3  # one more answer and its repair
    await judge.aclose()
    await hot.aclose()


async def test_a_call_without_a_format_does_not_teach_the_ladder_anything(make_settings, metrics, server) -> None:
    """Rubric learning sends free-text calls (extraction) before SPUR scoring with the same model."""
    from monitor.judge.client import JudgeClient

    client = JudgeClient(make_settings().judge, metrics)
    await client.complete([{"role": "user", "content": "list reasons"}])
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": {"type": "object"}}}
    await client.complete([{"role": "user", "content": "score"}], response_format=fmt)
    assert "response_format" in server.requests[1] and client.structured_ok
    await client.aclose()


@pytest.mark.parametrize("flavour", [m[0] for m in MATRIX[1:]])
async def test_logprobs_mode_reads_each_servers_answer_shape(make_settings, rubric, metrics, server, flavour) -> None:
    server.default = flavour
    judge = judge_from(make_settings(judge_mode="logprobs"), rubric, metrics)
    record = await judge.score(HAPPY)
    assert all(item.probability is not None and 0 < (item.mass or 0) <= 1 for item in record.items)
    assert all(request.get("top_logprobs") == 20 and "response_format" not in request for request in server.requests)
    await judge.aclose()


async def test_structured_output_off_sends_no_schema_and_the_gauge_says_free_text(make_settings, rubric, metrics,
                                                                                  server) -> None:
    judge = judge_from(make_settings(judge_structured_output=False, judge_answer_repair="lenient"), rubric, metrics)
    await judge.score(HAPPY)
    assert formats_sent(server) == [None]
    labels = {"endpoint": f"127.0.0.1:{server.port}", "model": "gpt-4o-mini"}
    assert sample(metrics, "convmon_judge_structured_fallback", **labels) == 3
    await judge.aclose()


@pytest.mark.parametrize(("flavour", "n", "level", "fenced"), [("llama_cpp_python", 40, 2, 0),
                                                               ("fastapi_422", 16, 3, 16)])
async def test_every_conversation_is_judged_strictly(make_settings, rubric, metrics, server, flavour, n, level,
                                                     fenced) -> None:
    """Eight conversations in flight, as the worker's judge agent runs them (judge_concurrency=8), every one
    judged at sample rate 1.0 with the default strict reading. A model that is free to write prose fences its
    JSON (``fence_free_text``): llama-cpp-python's json_object keeps it bare; a server that takes no
    response_format at all gets fenced answers, read as the object they hold. Two requests per conversation in
    flight carry a JSON schema before the fallback is remembered (docs/judge.md), none after."""
    server.default, server.fence_free_text = flavour, True
    judge = judge_from(make_settings(judge_concurrency=8), rubric, metrics)
    slots = asyncio.Semaphore(8)

    async def one(i: int):
        async with slots:
            return await judge.score(make_conversation("Fix my code?", "Done.", "Thanks, that works perfectly!",
                                                       conversation_id=f"c-{i}"))

    records = await asyncio.gather(*(one(i) for i in range(n)))
    await judge.aclose()
    assert len(records) == n and all(any(item.verdict for item in r.items) for r in records)
    sent = formats_sent(server)
    schema = sum(f in ("rubric_answers", "rubric_answers_plain") for f in sent)
    answered_at = ANY if level == 2 else None
    assert schema == 2 * 8 and sent.count(answered_at) == n, sent  # the first eight tried both schemas
    assert len(sent) == schema + sent.count(ANY) + sent.count(None)
    labels = {"endpoint": f"127.0.0.1:{server.port}", "model": "gpt-4o-mini"}
    assert sample(metrics, "convmon_judge_structured_fallback", **labels) == level
    assert sample(metrics, "convmon_judge_answer_repairs_total", kind="fence_removed") == fenced
    assert sample(metrics, "convmon_judge_repairs_total", outcome="ok") == 0  # no repair prompt was needed
