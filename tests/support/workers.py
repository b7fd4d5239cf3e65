"""Real worker processes for integration tests: `python -m monitor.cli worker` with env settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
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
        if name in ("openai_api_key", "kafka_sasl_password", "pii_reference_key"):
            secret = getattr(settings, name)
            value = secret.get_secret_value() if secret is not None else None
        env[f"CONVMON_{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


class WorkerProcess:
    def __init__(self, settings: Settings, log_path: Path, *, port: int | None = None,
                 module: str = "monitor.cli", extra_env: dict[str, str] | None = None,
                 args: tuple[str, ...] = ()) -> None:
        self.module, self.extra_env, self.args = module, extra_env or {}, args
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
        argv = [sys.executable, "-m", self.module, *(["worker"] if self.module == "monitor.cli" else []), *self.args]
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

    @property
    def target(self) -> str:
        """``host:port`` of /metrics, as Prometheus names the instance."""
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> WorkerProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def wait_until(predicate, timeout: float, interval: float = 1.0, message: str = "condition") -> None:
    """Poll ``predicate`` until it holds. Once a second: a scrape of a worker's /metrics costs it and the test
    about 0.1 s of CPU, which twice a second made waiting tests a fifth of a core's load each."""
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


@dataclass
class Exit:
    worker: str
    code: int | None
    at: float
    injected: bool  # killed by the test (a fault), not by itself


@dataclass
class Supervisor:
    """Restarts worker processes that exit, as Kubernetes or systemd would, and records every exit.

    A worker that exits by itself ``max_restarts`` times is left down: a crash loop, reported, not
    retried for ever. ``kill()`` injects a SIGKILL and restarts the worker at once (same port).
    """

    workers: dict[str, WorkerProcess]
    max_restarts: int = 3
    exits: list[Exit] = field(default_factory=list)
    given_up: set[str] = field(default_factory=set)
    _stopped: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _halt: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, name: str, timeout: float = 120.0) -> WorkerProcess:
        with self._lock:
            self._stopped.discard(name)
            self.workers[name].start(timeout=timeout)
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, daemon=True)
            self._thread.start()
        return self.workers[name]

    def kill(self, name: str) -> None:
        """SIGKILL ``name`` and start it again (its consumer group membership times out meanwhile)."""
        with self._lock:
            worker = self.workers[name]
            worker.kill()
            self.exits.append(Exit(name, worker.proc.returncode if worker.proc else None, time.time(), True))
            worker.start(timeout=120)

    def stop(self, name: str) -> None:
        """A graceful leave (SIGTERM): not an exit to restart."""
        with self._lock:
            self._stopped.add(name)
        self.workers[name].stop()

    def crashes(self) -> list[Exit]:
        return [e for e in self.exits if not e.injected]

    def all_down(self) -> bool:
        """Every started worker is down for good (crash loop given up, or stopped)."""
        started = [n for n, w in self.workers.items() if w.proc is not None]
        return bool(started) and all(n in self.given_up or n in self._stopped for n in started)

    def _watch(self) -> None:
        while not self._halt.wait(0.5):
            with self._lock:
                for name, worker in self.workers.items():
                    if worker.proc is None or worker.alive() or name in self._stopped or name in self.given_up:
                        continue
                    self.exits.append(Exit(name, worker.proc.returncode, time.time(), False))
                    if sum(1 for e in self.exits if e.worker == name and not e.injected) > self.max_restarts:
                        self.given_up.add(name)
                        continue
                    try:
                        worker.start(timeout=120)
                    except Exception:  # exited again while starting: the next tick records it
                        pass

    def shutdown(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
        for name, worker in self.workers.items():
            self._stopped.add(name)
            worker.stop()
