"""A SIGTERM waits for a judge call in flight only a bounded time, and its record is judged again
(judge_profile=local; the judge loop's drain, monitor/engine/loops.py and HANDOVER_GRACE_S in worker.py).

Kubernetes sends SIGTERM and, after terminationGracePeriodSeconds (30 s by default), SIGKILL. A local judge call may
take minutes; a worker that waited for it was SIGKILLed at 45 s and 100 s in two runs. Asserted: it exits within the
grace period while the judge call hangs, and the conversation it was judging is judged again by the next worker,
once.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from monitor.contracts.rubric_set import load_rubric_set
from monitor.runtime.scrape import by_label
from monitor.tools.openai_server import OpenAIServer
from tests.support.model_fixtures import publish_distilled_model
from tests.support.traffic import conversations, produce, scored
from tests.support.workers import WorkerProcess, wait_until


@pytest.mark.faults
def test_sigterm_during_a_long_judge_call(broker: str, make_settings, tmp_path: Path) -> None:
    with OpenAIServer(slow_s=120.0) as server:
        settings = make_settings(
            broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=2.0, registry_poll_s=1.0,
            openai_base_url=server.url, openai_api_key="sk-test", judge_profile="local", judge_timeout_s=110.0,
        )
        publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
        conv = conversations(settings, "sigterm", 1, seed=3)
        server.default = "slow"
        worker = WorkerProcess(settings, tmp_path / "worker.log").start()
        produce(settings, conv)
        wait_until(lambda: len(server.requests) >= 1, 60, message="the judge call in flight")
        t0 = time.monotonic()
        assert worker.proc is not None
        worker.proc.send_signal(signal.SIGTERM)
        try:
            worker.proc.wait(timeout=45)
        except Exception:  # what Kubernetes does after the grace period
            worker.kill()
        exit_s = time.monotonic() - t0
        print(f"SIGTERM -> exit: {exit_s:.1f} s (returncode {worker.proc.returncode})")
        server.default = "good"
        again = WorkerProcess(settings, tmp_path / "worker2.log").start()
        try:
            wait_until(lambda: scored(again.samples()).get("llm", 0) >= 1, 90, message="judged again")
            time.sleep(2)
            samples = again.samples()
            print("judged again by the next worker:", scored(samples),
                  by_label(samples, "convmon_dead_letters_total", "reason"))
        finally:
            again.stop()
        assert exit_s < 30, f"the worker held SIGTERM for {exit_s:.0f} s (returncode {worker.proc.returncode})"
        assert worker.proc.returncode == 0
        assert scored(samples).get("llm") == 1 and not by_label(samples, "convmon_dead_letters_total", "reason")
