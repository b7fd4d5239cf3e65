"""Real worker processes for integration tests: `python -m monitor.cli worker` with env settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from monitor.contracts.settings import Settings
from monitor.runtime.broker import free_port, stop_process
from monitor.runtime.scrape import scrape, wait_for_metrics


def settings_env(settings: Settings) -> dict[str, str]:
    """Every settings field as a CONVMON_* variable (JSON for structured values)."""
    env = {}
    for name, value in settings.model_dump(mode="json").items():
        if value is None:
            continue
        if name in ("openai_api_key", "kafka_sasl_password"):
            secret = getattr(settings, name)
            value = secret.get_secret_value() if secret is not None else None
        env[f"CONVMON_{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


class WorkerProcess:
    def __init__(self, settings: Settings, log_path: Path, *, port: int | None = None,
                 module: str = "monitor.cli", extra_env: dict[str, str] | None = None) -> None:
        self.module, self.extra_env = module, extra_env or {}
        self.port = port or free_port()
        self.settings = settings.model_copy(update={"metrics_port": self.port})
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def start(self, timeout: float = 60.0) -> WorkerProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
        env.update(settings_env(self.settings))
        env.update(self.extra_env)
        argv = [sys.executable, "-m", self.module, *(["worker"] if self.module == "monitor.cli" else [])]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(argv, env=env, stdout=log,
                                         stderr=subprocess.STDOUT)
        wait_for_metrics(self.url, self.proc, log_path=self.log_path, timeout=timeout)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def samples(self) -> list[tuple[str, dict[str, str], float]]:
        return scrape(self.url)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:] if self.log_path.exists() else ""

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def __enter__(self) -> WorkerProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def wait_until(predicate, timeout: float, interval: float = 0.5, message: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception as exc:  # the worker may not be serving yet
            last_error = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message} (last error: {last_error})")
