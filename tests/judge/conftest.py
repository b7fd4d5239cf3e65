"""Fixtures for the judge tests: a real test OpenAI server, settings with tiny backoffs, fresh metrics."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.tools.openai_server import OpenAIServer
from tests.support.judge_wiring import API_KEY


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
            "judge_explanations": False,  # hand-written answers below carry no reason; test_explanations asks for them
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


