"""Nothing silent at start: no judge endpoint, a misspelt CONVMON_* variable and an input that stays empty are
each said in one line and exported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from prometheus_client import CollectorRegistry

from monitor.contracts.env_check import check_environment, known_variables, unknown_variables
from monitor.contracts.metrics import Metrics
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.runtime.broker import free_port
from monitor.runtime.input_watch import InputWatch
from monitor.runtime.worker import NO_JUDGE, start_lines
from monitor.stages.hotpath import Input
from tests.support.hot_path import hot_path


def test_a_misspelt_setting_is_reported_with_the_closest_name() -> None:
    lines = check_environment({"CONVMON_SAMPLE_RATIO": "0.5", "CONVMON_SAMPLE_RATE": "0.2", "PATH": "/bin",
                               "CONVMON_OPENAI_API_KEY": "k", "CONVMON_SOAK_MINUTES": "1", "CONVMON_ZZZZZZZZ": "1"})
    assert lines == [
        "warning: CONVMON_SAMPLE_RATIO is not a convmon setting and is ignored; did you mean CONVMON_SAMPLE_RATE?",
        "warning: CONVMON_ZZZZZZZZ is not a convmon setting and is ignored; see docs/settings.md",
    ]
    assert unknown_variables({"CONVMON_BROKER_URL": "x"}, known_variables(Settings.model_fields)) == []


def test_a_removed_setting_says_why_it_is_no_longer_read() -> None:
    [line] = check_environment({"CONVMON_ENGINE": "checkpoint"})
    assert line.startswith("warning: CONVMON_ENGINE is no longer read: the checkpoint engine is the only engine")


def test_a_worker_says_at_start_which_dimensions_it_exports_and_where_other_comes_from() -> None:
    [line] = start_lines(Settings(openai_base_url="http://127.0.0.1:1/v1", dimension_values={"app": ["web"]}))
    assert line.startswith("metric dimensions: app (web), locale, model_version; only values listed in "
                           "CONVMON_DIMENSION_VALUES are exported as themselves; any other value is exported as "
                           '"other" (convmon_dimension_overflow_total{dimension}')
    [line] = start_lines(Settings(openai_base_url="http://127.0.0.1:1/v1", metric_dimensions=["app"],
                                  dimension_value_pattern="[a-z]+", dimension_cap=5))
    assert "metric dimensions: app; values listed in CONVMON_DIMENSION_VALUES, and values matching " \
           "CONVMON_DIMENSION_VALUE_PATTERN first-come up to 5 per dimension, are exported as themselves" in line
    [line] = start_lines(Settings(openai_base_url="http://127.0.0.1:1/v1", metric_dimensions=[]))
    assert line.startswith("metric dimensions: none")


def test_a_worker_without_a_judge_says_so_and_counts_the_slice_as_unjudged() -> None:
    assert start_lines(Settings())[1:] == [NO_JUDGE] and "unjudged" in NO_JUDGE
    assert start_lines(Settings(openai_base_url="http://127.0.0.1:1/v1"))[1:] == []
    hot, metrics = hot_path(sample_rate=1.0)
    hot_configured = hot.judge_configured
    assert hot_configured and metrics.registry.get_sample_value("convmon_judge_configured") == 1
    hot, metrics = hot_path(sample_rate=1.0, judge_configured=False)
    assert metrics.registry.get_sample_value("convmon_judge_configured") == 0

    def conversation(cid: str, **end: object) -> list[Input]:
        turn = {"conversation_id": cid, "turn_index": 0, "role": "user", "text": "hi", "timestamp": 1.0}
        return [Input(cid.encode(), orjson.dumps(turn), 0),
                Input(cid.encode(), orjson.dumps({"type": "end", "conversation_id": cid, "timestamp": 2.0, **end}), 0)]

    out = hot.ingest([*conversation("real"), *conversation("sim", simulated_truth=[])], now=1.0)
    sends = hot.judge_slice(out.closed, judge_accepting=True)
    assert [s.key for s in sends] == [b"sim"]  # the simulator's conversation is still judged (simulated truth)
    value = metrics.registry.get_sample_value
    assert value("convmon_conversations_routed_total", {"route": "unjudged"}) == 1
    assert value("convmon_conversations_routed_total", {"route": "sample"}) == 1


def test_an_empty_input_is_reported_once_and_its_return_too() -> None:
    metrics = Metrics(CollectorRegistry())
    now = [0.0]
    watch = InputWatch(metrics, "convmon.events", warn_after_s=60.0, clock=lambda: now[0])
    now[0] = 30.0
    assert watch.check() is None and metrics.registry.get_sample_value("convmon_input_idle_seconds") == 30.0
    now[0] = 61.0
    line = watch.check()
    assert line is not None and line.startswith("no input record on convmon.events for 61 s")
    now[0] = 200.0
    assert watch.check() is None  # once
    metrics.dead_letters.labels("malformed_json").inc()  # a record arrived, even if unusable
    assert watch.check() == "input records are arriving on convmon.events again"
    assert metrics.registry.get_sample_value("convmon_input_idle_seconds") == 0.0
    now[0] = 210.0
    metrics.events.labels("turn").inc()
    assert watch.check() is None and metrics.registry.get_sample_value("convmon_input_idle_seconds") == 0.0


def test_the_worker_command_reports_a_misspelt_variable_before_anything_else(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVMON_", "OPENAI_"))}
    env |= {"PYTHONPATH": str(REPO_ROOT), "CONVMON_SAMPLE_RATIO": "0.5", "COLUMNS": "200",
            "CONVMON_BROKER_URL": f"kafka://127.0.0.1:{free_port()}"}  # nothing listens: it stops right after
    result = subprocess.run([sys.executable, "-m", "monitor.cli", "worker"], capture_output=True, text=True,
                            timeout=120, env=env, cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 2
    assert lines[0] == ("warning: CONVMON_SAMPLE_RATIO is not a convmon setting and is ignored; did you mean "
                        "CONVMON_SAMPLE_RATE?")
    assert lines[1].startswith("error: cannot reach Kafka at")
