"""Fixtures for the judge tests: a real test OpenAI server, settings with tiny backoffs, fresh metrics."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.tools.openai_server import OpenAIServer

API_KEY = "sk-test-DO-NOT-LEAK-1234567890"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def make_settings(server: OpenAIServer, tmp_path: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "label_store_url": f"sqlite:///{tmp_path / 'labels.db'}",  # the judge budget's ledger
            "openai_base_url": server.url,
            "openai_api_key": API_KEY,
            "judge_backoff_base_s": 0.001,
            "judge_backoff_max_s": 0.005,
            "judge_max_retries": 3,
            "judge_timeout_s": 5.0,
            "judge_repair_prompt": "always",  # the repair tests; "auto" skips it at temperature 0 (test_real_servers)
        }
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(CollectorRegistry())


@pytest.fixture
def rubric() -> RubricSet:
    return load_rubric_set("spur-copilot", REPO_ROOT / "prompts")


def make_conversation(*texts: str, conversation_id: str = "c-1", **overrides: Any) -> Conversation:
    """Alternating user/assistant turns from ``texts`` (the first is the user's)."""
    turns = [{"index": i, "role": "user" if i % 2 == 0 else "assistant", "text": t} for i, t in enumerate(texts)]
    return Conversation.model_validate({"conversation_id": conversation_id, "turns": turns, **overrides})


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0
