"""A conversation with a rejected user turn, through a real worker and broker: on an input topic whose partitions
are not convmon's (every event forwarded through the re-keyed topic, so the worker that rejects the turn is not the
conversation's writer), the conversation is dead-lettered whole, never scored; a whole one beside it is scored;
and `convmon dead-letters summary` counts what `convmon_dead_letters_total` counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from monitor.contracts.settings import REPO_ROOT
from monitor.runtime.scrape import total
from tests.support.input_topics import distilled_per_conversation, input_worker
from tests.support.readback import read_to_end
from tests.support.topic_io import produce
from tests.support.workers import WorkerProcess, settings_env, wait_until

pytestmark = pytest.mark.integration


def events(cid: str, *, rejected: bool) -> list[bytes]:
    user = {"conversation_id": cid, "turn_index": 0, "role": "human" if rejected else "user",
            "text": "this is useless", "timestamp": time.time()}
    assistant = {"conversation_id": cid, "turn_index": 1, "role": "assistant", "text": "Happy to help!",
                 "timestamp": time.time()}
    end = {"type": "end", "conversation_id": cid, "turn_count": 2}
    return [orjson.dumps(e) for e in (user, assistant, end)]


@pytest.mark.timeout(300)
def test_a_conversation_with_a_rejected_turn_is_dead_lettered_whole_not_scored(broker: str, make_settings,
                                                                                 tmp_path: Path) -> None:
    settings = input_worker(make_settings, broker, "json", 1)  # 1 input partition against convmon's 4
    records = [(cid.encode(), raw) for cid, rejected in (("whole", False), ("partial", True))
               for raw in events(cid, rejected=rejected)]
    produce(broker, settings.input_topic_name, records)
    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        def dead(reason: str) -> float:
            return total(worker.samples(), "convmon_dead_letters_total", reason=reason)

        wait_until(lambda: dead("conversation_incomplete") >= 1 and total(
            worker.samples(), "convmon_conversations_scored_total", scorer="distilled") >= 1,
                   timeout=120, message=f"the partial conversation dead-lettered ({worker.log()})")
        time.sleep(2)
        samples = worker.samples()
        assert worker.alive(), worker.log()
    assert total(samples, "convmon_conversations_incomplete_total", action="dead_lettered") == 1
    assert total(samples, "convmon_dead_letters_total", reason="invalid_schema") == 1
    assert distilled_per_conversation(broker, settings) == Counter({"whole": 1})  # "partial" never scored
    letters = read_to_end(broker, settings.topic("dead-letters")).records
    reasons = sorted((dict(r.headers)["convmon-reason"], dict(r.headers).get("convmon-field")) for r in letters)
    assert reasons == [(b"conversation_incomplete", b"role"), (b"invalid_schema", b"role")]

    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")} | settings_env(settings)
    result = subprocess.run([sys.executable, "-m", "monitor.cli", "dead-letters", "summary", "--json"],
                            env=env | {"PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    exported = {reason: total(samples, "convmon_dead_letters_total", reason=reason)
                for reason in summary["by_reason"]}
    assert summary["by_reason"] == exported and summary["letters"] == total(samples, "convmon_dead_letters_total")
