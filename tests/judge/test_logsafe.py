"""Credentials in OPENAI_BASE_URL never reach a log line, and never a settings repr."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.judge.logsafe import QUIET_LOGGERS, install_log_safety, scrub_credentials
from monitor.tools.openai_server import OpenAIServer
from tests.support.judge_wiring import judge_from

PASSWORD = "pw-Zq81-never-log-me"


@pytest.fixture
def log_safety() -> Iterator[None]:
    factory = logging.getLogRecordFactory()
    levels = {name: logging.getLogger(name).level for name in ("httpx", "httpcore")}
    install_log_safety()
    yield
    logging.setLogRecordFactory(factory)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_scrub_credentials() -> None:
    assert scrub_credentials("GET https://user:pa:ss@host:8000/v1/x ok") == "GET https://***@host:8000/v1/x ok"
    assert scrub_credentials("http://token@h/v1 and kafka://u:p@b:9092") == "http://***@h/v1 and kafka://***@b:9092"
    assert scrub_credentials("mail bob@example.com, url https://host/a@b") == "mail bob@example.com, url https://host/a@b"


def _judge_through(url: str, caplog: pytest.LogCaptureFixture) -> None:
    rubric = load_rubric_set("spur-copilot", Settings().prompts_dir)
    settings = Settings(openai_base_url=url, openai_api_key="k", judge_max_retries=0)
    conversation = Conversation(conversation_id="c", turns=[{"index": 0, "role": "user", "text": "thanks!"}])

    async def run() -> None:
        judge = judge_from(settings, rubric, Metrics(CollectorRegistry()))
        try:
            await judge.score(conversation)
        finally:
            await judge.aclose()

    with caplog.at_level(logging.DEBUG):
        asyncio.run(run())


@pytest.fixture
def without_log_safety() -> Iterator[None]:
    """Logging as a fresh process has it: an earlier in-process CLI test may have installed log safety."""
    factory = logging.getLogRecordFactory()
    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    logging.setLogRecordFactory(logging.LogRecord)
    for name in levels:
        logging.getLogger(name).setLevel(logging.NOTSET)
    yield
    logging.setLogRecordFactory(factory)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_the_control_leaks_without_log_safety(without_log_safety: None, caplog: pytest.LogCaptureFixture) -> None:
    """The test can fail: without install_log_safety, httpx/openai log the URL with its password."""
    with OpenAIServer() as server:
        _judge_through(server.url.replace("http://", f"http://judge:{PASSWORD}@"), caplog)
        assert len(server.requests) == 1
    assert PASSWORD in caplog.text


def test_no_log_line_carries_the_base_url_password(log_safety: None, caplog: pytest.LogCaptureFixture) -> None:
    logging.getLogger("httpx").setLevel(logging.DEBUG)  # even if someone turns httpx back up
    with OpenAIServer() as server:
        _judge_through(server.url.replace("http://", f"http://judge:{PASSWORD}@"), caplog)
        assert len(server.requests) == 1
    assert "HTTP Request" in caplog.text and "***@127.0.0.1" in caplog.text
    assert PASSWORD not in caplog.text


def test_httpx_is_quieted_and_settings_repr_hides_the_url(log_safety: None) -> None:
    assert logging.getLogger("httpx").level == logging.WARNING
    settings = Settings(openai_base_url=f"https://judge:{PASSWORD}@llm.internal/v1")
    assert PASSWORD not in repr(settings) and PASSWORD not in str(settings) and PASSWORD not in repr(settings.judge)
