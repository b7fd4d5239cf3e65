"""`convmon retrain`: its schedule, its settings, and that a failing round is logged, counted and survived."""

from __future__ import annotations

import logging
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import load_settings
from monitor.runtime.broker import free_port, stop_process
from monitor.runtime.retrainer import Retrainer, Schedule
from tests.support.workers import wait_until


def test_cron_schedule_with_minutes_or_seconds_and_the_deprecated_interval(make_settings) -> None:
    default = Schedule.from_settings(make_settings())
    assert default == Schedule(cron="*/15 * * * *")
    assert default.next_after(1000.0) == 1800.0  # the next quarter hour
    assert Schedule(cron="* * * * * */8").next_after(1000.0) == 1008.0  # a 6th field is seconds (:40 -> :48)
    assert Schedule.from_settings(make_settings(retrain_interval_s=30.0)) == Schedule(interval_s=30.0)
    for off in ("off", "", "OFF", None):
        assert Schedule.from_settings(make_settings(retrain_cron=off)) is None


def test_a_bad_cron_is_one_line_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVMON_RETRAIN_CRON", "every quarter hour")
    with pytest.raises(ConfigError, match=r"setting 'retrain_cron' \(CONVMON_RETRAIN_CRON or convmon.toml\): .*"
                                          r"is not a cron expression"):
        load_settings()


def test_a_failing_round_is_logged_counted_and_the_next_round_runs(make_settings, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The label store is locked by another process: each part fails with one log line and a metric,
    and the retrainer keeps going; once the lock goes, the next round succeeds."""
    db = tmp_path / "labels.db"
    settings = make_settings(label_store_url=f"sqlite:///{db}?timeout=0.2", calibration_min_labels=10)
    registry = CollectorRegistry()
    retrainer = Retrainer(settings.distill, settings.rubrics, registry=registry)
    retrainer.store.count()  # creates the table
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    with caplog.at_level(logging.ERROR, logger="convmon.retrain"):
        assert retrainer.run_round() == {"distilled": "failed", "calibration": "failed"}
    lock.execute("ROLLBACK")
    lock.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "convmon.retrain"]
    assert len(lines) == 2 and all("failed, keeping the live model until the next round" in line for line in lines)
    assert all("\n" not in line for line in lines)

    def count(part: str, outcome: str) -> float | None:
        return registry.get_sample_value("convmon_retrain_rounds_total", {"part": part, "outcome": outcome})

    assert count("distilled", "failed") == 1 and count("calibration", "failed") == 1
    assert registry.get_sample_value("convmon_retrain_last_success_timestamp_seconds", {"part": "distilled"}) == 0
    assert retrainer.run_round() == {"distilled": "skipped", "calibration": "skipped"}  # no labels yet
    assert count("distilled", "skipped") == 1
    assert registry.get_sample_value("convmon_retrain_last_success_timestamp_seconds", {"part": "distilled"}) > 0


def test_run_forever_runs_rounds_on_the_schedule_until_stopped(make_settings) -> None:
    settings = make_settings(calibration_min_labels=0)
    retrainer = Retrainer(settings.distill, settings.rubrics, registry=CollectorRegistry())
    stop = threading.Event()
    rounds: list[dict[str, str]] = []
    run_round = retrainer.run_round

    def counted() -> dict[str, str]:
        rounds.append(run_round())
        if len(rounds) == 2:
            stop.set()
        return rounds[-1]

    retrainer.run_round = counted  # type: ignore[method-assign]
    thread = threading.Thread(target=retrainer.run_forever, args=(Schedule(interval_s=0.2), stop))
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and rounds == [{"distilled": "skipped"}] * 2


def test_retrain_off_exits_at_once_and_says_so(tmp_path: Path) -> None:
    env = {"CONVMON_RETRAIN_CRON": "off", "CONVMON_LABEL_STORE_URL": f"sqlite:///{tmp_path / 'l.db'}",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PATH": "/usr/bin:/bin"}
    for args in ([], ["--once"]):
        result = subprocess.run([sys.executable, "-m", "monitor.cli", "retrain", *args], capture_output=True,
                                text=True, timeout=120, env=env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "retraining is off (CONVMON_RETRAIN_CRON=off)" in result.stderr
    assert not (tmp_path / "l.db").exists()  # nothing was opened


def test_a_stop_mid_round_abandons_the_round_at_once(make_settings, caplog: pytest.LogCaptureFixture) -> None:
    settings = make_settings(calibration_min_labels=0)
    retrainer = Retrainer(settings.distill, settings.rubrics, registry=CollectorRegistry())
    started, release, stop = threading.Event(), threading.Event(), threading.Event()

    def training() -> dict[str, str]:  # a round that trains until released
        started.set()
        release.wait(60)
        return {"distilled": "published"}

    retrainer.run_round = training  # type: ignore[method-assign]
    outcome: list[bool] = []
    thread = threading.Thread(target=lambda: outcome.append(retrainer.run_forever(Schedule(interval_s=0.01), stop)))
    with caplog.at_level(logging.INFO, logger="convmon.retrain"):
        thread.start()
        assert started.wait(30)
        stop.set()
        thread.join(timeout=2)  # a poll, not the round
        assert not thread.is_alive() and outcome == [False]
    release.set()
    assert "stopped mid-round: the round is abandoned" in caplog.text


def test_sigterm_mid_round_exits_within_the_grace_period_leaving_the_round_to_the_next(tmp_path: Path) -> None:
    """compose gives the retrainer 10 s between SIGTERM and SIGKILL. The abandoned round published nothing and
    took nothing from the label store: the next round trains from the same labels."""
    from distill.registry import ModelRegistry
    from distill.store import LabelStore
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.contracts.settings import REPO_ROOT
    from tests.support.model_fixtures import feedback_label_records

    db = f"sqlite:///{tmp_path / 'labels.db'}"
    store = LabelStore(db)
    store.upsert(feedback_label_records(load_rubric_set("spur-copilot", REPO_ROOT / "prompts"), 600, seed=3))
    labels = store.count()
    store.close()
    env = {"CONVMON_LABEL_STORE_URL": db, "CONVMON_MODEL_REGISTRY": str(tmp_path / "models"),
           "CONVMON_DISTILL_REPORT_DIR": str(tmp_path / "reports"), "CONVMON_METRICS_HOST": "127.0.0.1",
           "CONVMON_RETRAIN_METRICS_PORT": str(free_port()), "CONVMON_RETRAIN_CRON": "* * * * * *",
           "CONVMON_CALIBRATION_MIN_LABELS": "0", "PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin",
           "HF_HUB_OFFLINE": "1"}
    log_path = tmp_path / "retrain.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "retrain"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        wait_until(lambda: "retraining round started" in log_path.read_text(errors="replace"), timeout=120,
                   interval=0.05, message="the first round to start")
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        assert proc.wait(timeout=10) == 0, log_path.read_text(errors="replace")
        elapsed = time.monotonic() - sent
    finally:
        stop_process(proc)
    text = log_path.read_text(errors="replace")
    assert "stopped mid-round: the round is abandoned" in text and "retrain distilled spur-copilot:" not in text, text
    assert elapsed < 10
    assert ModelRegistry(tmp_path / "models").live_version("distilled") is None
    store = LabelStore(db)
    assert store.count() == labels
    store.close()


NATIVE_ROUND = """
import sys, torch
from monitor.contracts.settings import load_settings
from monitor.runtime import retrainer
def training(self):
    print("training", flush=True)
    a = torch.randn(256, 256)
    while True:  # each op releases the GIL in C++ and takes it back on return
        a = torch.tanh(a @ a)
retrainer.Retrainer.run_round = training
sys.exit(retrainer.run_retrainer(load_settings(), once=False))
"""


def test_sigterm_while_the_round_is_in_native_code_exits_0_not_sigabrt(tmp_path: Path) -> None:
    """Interpreter finalization ends a daemon thread that is inside torch with pthread_exit, and through C++
    frames that aborts (SIGABRT, 'terminate called without an active exception'): the retrainer must not finalize."""
    from monitor.contracts.settings import REPO_ROOT

    env = {"CONVMON_LABEL_STORE_URL": f"sqlite:///{tmp_path / 'l.db'}", "CONVMON_MODEL_REGISTRY": str(tmp_path / "m"),
           "CONVMON_METRICS_HOST": "127.0.0.1", "CONVMON_RETRAIN_METRICS_PORT": str(free_port()),
           "CONVMON_RETRAIN_CRON": "* * * * * *", "PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([sys.executable, "-c", NATIVE_ROUND], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "training\n"
        time.sleep(0.3)  # inside the loop of torch ops
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        stop_process(proc)
    assert proc.returncode == 0, err[-2000:]
    assert "stopped mid-round: the round is abandoned" in err
