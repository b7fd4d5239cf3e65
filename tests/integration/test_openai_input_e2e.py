"""docs/input.md's OpenAI chat log example, end to end: sent as it is (unkeyed) to a worker with
CONVMON_INPUT_FORMAT=openai, then replayed from a file with `convmon replay --format openai`; every conversation is
scored once by the distilled path, nothing is dead-lettered, and the messages that are not turns are counted."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import decode_score
from monitor.contracts.settings import REPO_ROOT
from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import total
from tests.support.docs_examples import openai_chat_example
from tests.support.model_fixtures import publish_distilled_model
from tests.support.readback import read_to_end
from tests.support.topic_io import produce
from tests.support.workers import WorkerProcess, settings_env, wait_until

pytestmark = pytest.mark.integration
SKIPPED = {"system": 1, "developer": 1, "assistant": 2, "tool": 2}  # in the example: not turns


@pytest.mark.timeout(300)  # a worker start, two sends
def test_the_docs_chat_log_example_is_scored_once_per_conversation(broker: str, make_settings,
                                                                  tmp_path: Path) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", idle_timeout_s=3.0, registry_poll_s=1.0,
                             sample_rate=0.0, input_format="openai")
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    publish_distilled_model(settings, rubric)
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    lines = openai_chat_example()
    replayed = tmp_path / "chats.jsonl"  # the same example under other ids, from a file
    replayed.write_bytes(b"\n".join(line.replace(b"chat-", b"file-").replace(b"1042", b"2042") for line in lines))

    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        produce(broker, settings.topic("events"), [(None, line) for line in lines])

        def scored() -> float:
            return total(worker.samples(), "convmon_conversations_scored_total", scorer="distilled")

        wait_until(lambda: scored() >= 3, timeout=120, message=f"3 conversations scored ({worker.log()})")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")} | settings_env(settings)
        result = subprocess.run([sys.executable, "-m", "monitor.cli", "replay", "--format", "openai", str(replayed)],
                                env=env | {"PYTHONPATH": str(REPO_ROOT), "COLUMNS": "200"}, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "replayed 6 events" in result.stderr and "left out 6 messages that are not turns" in result.stderr
        wait_until(lambda: scored() >= 6, timeout=120, message=f"6 conversations scored ({worker.log()})")
        time.sleep(2)  # a double count would arrive now
        samples = worker.samples()
        assert worker.alive(), worker.log()

    assert total(samples, "convmon_conversations_scored_total", scorer="distilled") == 6
    assert total(samples, "convmon_dead_letters_total") == 0
    assert {role: total(samples, "convmon_input_messages_skipped_total", role=role) for role in SKIPPED} == SKIPPED
    scores = [decode_score(r.value, rubric) for r in read_to_end(broker, settings.topic("scores")).records]
    assert Counter(s.conversation_id for s in scores if s.scorer == "distilled") == Counter(
        {cid: 1 for cid in ("chat-1", "1042", "chat-3", "file-1", "2042", "file-3")})
