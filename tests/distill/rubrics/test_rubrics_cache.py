"""The content-hash cache in front of the judge client, and embedding de-duplication."""

from __future__ import annotations

import asyncio
from pathlib import Path

import openai
import pytest
from prometheus_client import CollectorRegistry

from distill.rubrics.cache import CachingClient, ResponseCache, normalise_nonces
from distill.rubrics.dedup import deduplicate, make_embedder
from monitor.contracts.errors import ConfigError
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricItem
from monitor.contracts.settings import Settings
from monitor.judge.client import JudgeClient


def settings_for(server, tmp_path: Path) -> Settings:
    return Settings(openai_base_url=server.url, openai_api_key="sk-test", data_dir=tmp_path,
                    judge_backoff_base_s=0.001, judge_backoff_max_s=0.005, judge_max_retries=2)


def conversation_prompt(nonce: str, text: str) -> list[dict[str, str]]:
    block = f'(nonce {nonce}):\n<<<CONVERSATION {nonce}>>>\n{{"turn": 0, "role": "user", "text": "{text}"}}\n' \
            f"<<<END CONVERSATION {nonce}>>>"
    return [{"role": "system", "content": "<REASONS></REASONS> at most 3 reasons **satisfied**"},
            {"role": "user", "content": "<REASONS> at most 3 reasons **satisfied**\n" + block}]


async def _run(server, tmp_path: Path, prompts: list[list[dict[str, str]]]) -> CachingClient:
    settings = settings_for(server, tmp_path)
    client = JudgeClient(settings.judge, Metrics(CollectorRegistry()))
    llm = CachingClient(client, ResponseCache(tmp_path / "cache"))
    try:
        for messages in prompts:
            await llm.complete(messages, max_tokens=100)
    finally:
        await client.aclose()
    return llm


def test_nonces_do_not_defeat_the_cache_but_content_does(server, tmp_path: Path) -> None:
    llm = asyncio.run(_run(server, tmp_path, [conversation_prompt("aa11", "thanks"),
                                              conversation_prompt("bb22", "thanks"),
                                              conversation_prompt("cc33", "thank you a lot")]))
    assert (llm.stats.calls, llm.stats.hits) == (2, 1)
    assert len(server.requests) == 2
    assert llm.stats.cost_usd > 0 and llm.stats.usage.prompt > 0
    again = asyncio.run(_run(server, tmp_path, [conversation_prompt("dd44", "thank you a lot")]))
    assert (again.stats.calls, again.stats.hits) == (0, 1)  # a new process replays from disk


def test_cache_holds_answers_not_prompts(server, tmp_path: Path) -> None:
    asyncio.run(_run(server, tmp_path, [conversation_prompt("aa11", "my secret words")]))
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 1 and "my secret words" not in files[0].read_text()


def test_cut_off_answers_are_not_cached(server, tmp_path: Path) -> None:
    server.script("truncated")
    llm = asyncio.run(_run(server, tmp_path, [conversation_prompt("aa11", "thanks")]))
    assert llm.stats.calls == 1 and not list((tmp_path / "cache").rglob("*.json"))


def test_cache_only_client_explains_the_missing_endpoint(tmp_path: Path) -> None:
    llm = CachingClient(None, ResponseCache(tmp_path), default_model="gpt-4o-mini")
    with pytest.raises(ConfigError, match="not in the cache and no judge endpoint is configured"):
        asyncio.run(llm.complete([{"role": "user", "content": "hi"}]))


def test_normalise_nonces_leaves_other_text_alone() -> None:
    messages = [{"role": "user", "content": "abc <<<CONVERSATION f00d>>> x <<<END CONVERSATION f00d>>>"}]
    assert normalise_nonces(messages)[0]["content"] == "abc <<<CONVERSATION NONCE>>> x <<<END CONVERSATION NONCE>>>"
    assert normalise_nonces([{"role": "user", "content": "f00d"}])[0]["content"] == "f00d"


def item(item_id: str, name: str, description: str) -> RubricItem:
    return RubricItem(id=item_id, name=name, polarity=item_id.split(".")[0], description=description)  # type: ignore[arg-type]


ITEMS = [
    item("sat.gratitude", "Gratitude", "The user thanks the agent for its help."),
    item("sat.gratitude_2", "Gratitude", "The user thanks the agent for the help."),
    item("sat.booking", "Booking Acceptance", "The user accepts the hotel booking the agent offers."),
    item("dsat.gratitude", "Gratitude", "The user thanks the agent for its help."),  # other polarity: kept
]


def test_hashing_dedup_drops_near_duplicates_within_a_polarity() -> None:
    kept, dropped = deduplicate(ITEMS, make_embedder("hashing"), threshold=0.85)
    assert [i.id for i in kept] == ["sat.gratitude", "sat.booking", "dsat.gratitude"]
    assert dropped[0].dropped == "sat.gratitude_2" and dropped[0].kept == "sat.gratitude"
    assert 0.85 <= dropped[0].cosine < 1.0
    kept, _ = deduplicate(ITEMS[2:3], make_embedder("hashing"), keep=ITEMS[:1])
    assert [i.id for i in kept] == ["sat.booking"]


def test_openai_embeddings_dedup_through_the_test_server(server) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="sk-test")
    kept, dropped = deduplicate(ITEMS[:3], make_embedder("openai", openai_client=client), threshold=0.8)
    assert [i.id for i in kept] == ["sat.gratitude", "sat.booking"] and len(dropped) == 1
    assert any("embeddings" in p for p in server.paths)


def test_dedup_validates_its_inputs() -> None:
    with pytest.raises(ConfigError, match="'threshold' parameter of deduplicate must be a float in"):
        deduplicate(ITEMS, make_embedder("hashing"), threshold=0)
    with pytest.raises(ConfigError, match="needs a configured endpoint"):
        make_embedder("openai")
