"""Fixtures for rubric learning: the test OpenAI server with a scripted SPUR A.1 / A.2 stand-in.

:func:`rubric_stand_in.rubric_llm` is passed as the server's default behaviour. Extraction requests (``<REASONS>``)
are answered from keywords in the user turns, restricted to the label's polarity (supervised
extraction); summarization requests (``<Rubric>``) count which pattern names the examples mention
and return the most frequent as a numbered list; anything else (scoring) gets the server's own
rubric-aware answer, which also decides from user keywords by item id. Deterministic, so every
number the tests see follows from the data, not from the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.tools.openai_server import OpenAIServer
from tests.support.rubric_stand_in import rubric_llm


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(default=rubric_llm) as srv:
        yield srv


@pytest.fixture
def judge_env(server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Environment for the CLI: the test server as judge, data and registry under tmp_path."""
    values = {
        "CONVMON_OPENAI_BASE_URL": server.url, "CONVMON_OPENAI_API_KEY": "sk-test", "CONVMON_DATA_DIR": str(tmp_path),
        "CONVMON_MODEL_REGISTRY": str(tmp_path / "models"), "CONVMON_JUDGE_REQUESTS_PER_MINUTE": "1000000",
        "CONVMON_JUDGE_TOKENS_PER_MINUTE": "1000000000", "CONVMON_JUDGE_BACKOFF_BASE_S": "0.001",
        "CONVMON_JUDGE_BACKOFF_MAX_S": "0.005",
        "CONVMON_DOMAIN_DESCRIPTION": "a restaurant and hotel booking assistant",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return tmp_path
