"""The shared test server itself: other engineers build integration tests and benchmarks on it."""

from __future__ import annotations

import math
import time

import openai

from monitor.contracts.settings import REPO_ROOT
from monitor.judge.prompt import conversation_message
from monitor.tools.openai_server import OpenAIServer
from monitor.tools.stand_in_judge import decide, embed
from tests.support.judge_wiring import make_conversation


async def test_embeddings_are_deterministic_and_normalised(server: OpenAIServer) -> None:
    client = openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
    first = await client.embeddings.create(model="m", input=["thanks a lot", "thanks a lot", "broken printer"])
    vectors = [d.embedding for d in first.data]
    assert vectors[0] == vectors[1] != vectors[2] and len(vectors[0]) == 64
    assert math.isclose(sum(v * v for v in vectors[0]), 1.0, rel_tol=1e-5)
    small = await client.embeddings.create(model="m", input="hello", dimensions=8, encoding_format="float")
    assert small.data[0].embedding == embed("hello", 8)
    await client.close()


def test_decide_is_keyword_driven() -> None:
    assert decide("sat.gratitude", "Gratitude", "thank you", 1) == (True, 6.0)
    assert decide("sat.gratitude", "Gratitude", "thanks!", 1) == (True, 7.0)  # "thank" and "thanks"
    assert decide("dsat.negative_feedback", "Negative Feedback", "all good", 1) == (False, 0.0)
    assert decide("sat.engagement", "Engagement", "", 4)[0] is True
    assert decide("sat.custom_learned", "Recipe Substitution", "any substitution for eggs?", 1)[0] is True


def test_rubric_answer_reads_the_delimited_conversation(server: OpenAIServer) -> None:
    from monitor.tools.stand_in_judge import answer

    user, _ = conversation_message(REPO_ROOT / "prompts", make_conversation("thank you"), max_chars=2000)
    body = {"messages": [{"role": "system", "content": "- [sat.gratitude] Gratitude: thanks"},
                         {"role": "user", "content": user}]}
    text, _ = answer(body)
    assert "[sat.gratitude] Gratitude: Y, 6" in text


async def test_fixed_latency_and_azure_route() -> None:
    with OpenAIServer(latency_s=0.2) as server:
        client = openai.AsyncAzureOpenAI(azure_endpoint=server.azure_endpoint, api_key="k",
                                         api_version="2024-10-21", max_retries=0)
        started = time.perf_counter()
        result = await client.chat.completions.create(model="dep", messages=[{"role": "user", "content": "hi"}])
        assert time.perf_counter() - started >= 0.2
        assert result.choices[0].message.content is not None
        assert server.paths == ["/openai/deployments/dep/chat/completions"]
        await client.close()
