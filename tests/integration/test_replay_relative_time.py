"""`convmon replay --relative-time` end to end: a USS file (its events stamped from 1.7e9, November 2023) replayed
through the CLI into a real broker and worker. With the flag, the exported `convmon_score_delay_seconds` measures
the pipeline (seconds); without it, the data's age (years), which is what the flag exists to avoid."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import total
from monitor.tools.replay import read_dataset
from tests.support.model_fixtures import publish_distilled_model
from tests.support.workers import WorkerProcess, settings_env, wait_until

pytestmark = pytest.mark.integration

DIALOGUES = 6
LIVE_DELAY_S = 60.0  # a relative-time replay's delays: the pipeline's, well under a minute on a busy machine
OLD_DELAY_S = 365 * 86400.0  # the file's own times are older than this (1.7e9 is 2023-11-14)
DELAY = "convmon_score_delay_seconds"


def uss_file(path: Path) -> Path:
    """USS dialogues (tab-separated ROLE, TEXT, ACTION, SATISFACTION; a blank line between dialogues)."""
    dialogues = [f"\nUSER\tI need a train to town {n}\t\t3,3,3\nSYSTEM\tThe 9:15 goes there.\t\t\n"
                 f"USER\tthanks, that works\t\t4,4,4\nUSER\tOVERALL\t\t4,4,4\n" for n in range(DIALOGUES)]
    path.write_text("".join(dialogues), encoding="utf-8")
    return path


def replay(settings: Settings, path: Path, *flags: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")} | settings_env(settings)
    env |= {"PYTHONPATH": str(REPO_ROOT), "COLUMNS": "200"}  # one line for the CLI's report (on stderr)
    result = subprocess.run([sys.executable, "-m", "monitor.cli", "replay", str(path), *flags], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"replayed {DIALOGUES * 4} events" in result.stderr  # 3 turns and an end event each


def delays(worker: WorkerProcess) -> Callable[[], tuple[float, float, float]]:
    """The distilled scores' delay histogram as (count, sum, count in the buckets up to LIVE_DELAY_S)."""
    def read() -> tuple[float, float, float]:
        s = worker.samples()
        return (total(s, f"{DELAY}_count", scorer="distilled"), total(s, f"{DELAY}_sum", scorer="distilled"),
                total(s, f"{DELAY}_bucket", scorer="distilled", le=str(LIVE_DELAY_S)))
    return read


@pytest.mark.timeout(300)  # about 30 s: a worker start and two replays
def test_relative_time_replay_exports_the_pipelines_delay_not_the_datas_age(broker: str, make_settings,
                                                                            tmp_path: Path) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", idle_timeout_s=3.0, registry_poll_s=1.0)
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    publish_distilled_model(settings, rubric)
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    live, old = uss_file(tmp_path / "Live.txt"), uss_file(tmp_path / "Old.txt")  # the ids differ by file name
    times = [e["timestamp"] for e in read_dataset(old).events]
    assert min(times) >= 1.7e9 and max(times) < 1.71e9  # the file's own times: November 2023

    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        read = delays(worker)
        assert read() == (0.0, 0.0, 0.0)

        replay(settings, live, "--relative-time")
        wait_until(lambda: read()[0] >= DIALOGUES, timeout=120, message=f"{DIALOGUES} distilled scores (live)")
        count, seconds, fast = read()
        assert count == DIALOGUES, worker.log()
        assert fast == DIALOGUES and seconds / count < LIVE_DELAY_S, (count, seconds, fast)

        replay(settings, old)  # the same dialogues, keeping the file's 2023 times
        wait_until(lambda: read()[0] >= 2 * DIALOGUES, timeout=120, message=f"{DIALOGUES} more scores (old)")
        count2, seconds2, fast2 = read()
        assert worker.alive(), worker.log()

    assert count2 == 2 * DIALOGUES
    assert fast2 == fast  # none of the old-time scores lands in a bucket up to a minute
    assert (seconds2 - seconds) / DIALOGUES > OLD_DELAY_S  # each one's delay is the data's age: years
