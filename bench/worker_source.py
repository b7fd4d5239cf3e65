"""Where a benchmarked worker's code comes from: this checkout, or another checkout of this repository (an older
release) run by its own interpreter with the same driver, so two releases compare on the same input.

An older worker refuses CONVMON_* fields it does not know, so it gets only ``WORKER_SETTINGS``; which code it
imported is checked (``worker_code``) and reported beside its numbers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import REPO_ROOT

# The settings the benchmarks give a worker, all of them fields of every release since 9858d22.
WORKER_SETTINGS = ("broker_url", "topic_partitions", "sample_rate", "featurizer", "data_dir", "model_registry",
                   "registry_poll_s", "app_id", "topic_prefix", "label_store_url", "metrics_port")


def known_setting(name: str) -> bool:
    """Whether a CONVMON_* variable is one of ``WORKER_SETTINGS``."""
    return name.removeprefix("CONVMON_").lower() in WORKER_SETTINGS


def every_setting(name: str) -> bool:
    return True


@dataclass(frozen=True)
class WorkerSource:
    """A checkout and the interpreter that runs ``python -m monitor.cli worker`` in it; ``older``: pass only
    ``WORKER_SETTINGS`` (this checkout's worker takes every setting)."""

    checkout: Path = REPO_ROOT
    python: str = sys.executable
    older: bool = False

    def settings_filter(self) -> Callable[[str], bool]:
        return known_setting if self.older else every_setting


def worker_code(checkout: Path, env: Mapping[str, str], pid: int | None = None,
                python: str = sys.executable) -> dict[str, Any]:
    """Which code a worker started in ``checkout`` imports: ``monitor.cli``'s file as the same interpreter, working
    directory and environment resolve it, the checkout's commit, and the live process's working directory."""
    found = subprocess.run([python, "-c", "import monitor.cli; print(monitor.cli.__file__)"], cwd=checkout,
                           env=dict(env), capture_output=True, text=True, timeout=120)
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, timeout=30)
    out: dict[str, Any] = {"checkout": str(checkout), "commit": commit.stdout.strip() or None, "python": python,
                           "monitor_cli_file": found.stdout.strip() or None}
    if pid is not None:
        try:
            out["process_cwd"] = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            out["process_cwd"] = None
    imported = out["monitor_cli_file"]
    if not imported or not Path(imported).resolve().is_relative_to(checkout.resolve()):
        raise ConfigError(f"a worker started in {checkout} would import monitor.cli from {imported!r} "
                          f"({found.stderr.strip()[-300:]})")
    return out
