"""What a SIGTERM does to a worker whose judge call is in flight (issue #37, judge_profile=local): a known issue,
pinned by a strict xfail so that the fix shows up.

Kubernetes sends SIGTERM and, after terminationGracePeriodSeconds (30 s by default), SIGKILL. A local judge
call may take minutes. Measured here: how long the worker takes to exit after SIGTERM while a judge call
hangs, and whether the conversation being judged is judged again by the next worker.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from monitor.contracts.rubric_set import load_rubric_set
from monitor.runtime.scrape import by_label
from monitor.tools.openai_server import OpenAIServer
from tests.model_fixtures import publish_distilled_model
from tests.reliability.test_faults import conversations, produce, scored
from tests.workers import WorkerProcess, wait_until


@pytest.mark.faults
@pytest.mark.xfail(strict=True, reason=(
    "faust's stream_wait_empty (default on, not overridden in monitor/runtime/app.py) makes app.stop wait for "
    "every in-flight event, so SIGTERM waits for the judge call (measured: held until SIGKILL, then re-judged by "
    "the next worker). stream_wait_empty=False alone exits in ~7 s but the cancelled event is acked by faust's "
    "stream iterator and its judgement is lost (measured). Needs the judge agent to ack only finished "
    "judgements (stream.noack() + stream.ack) with a bounded wait: monitor/runtime/{agents,app}.py, not the "
    "judge's files"))
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
            print("judged again by the next worker:", scored(again.samples()),
                  by_label(again.samples(), "convmon_dead_letters_total", "reason"))
        finally:
            again.stop()
        assert exit_s < 30, f"the worker held SIGTERM for {exit_s:.0f} s (returncode {worker.proc.returncode})"
