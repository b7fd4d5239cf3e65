"""promtool, from the Debian package ``prometheus``; a missing promtool is a failure, not a skip, because the rules
it checks are what pages the on-call engineer."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from monitor.contracts.settings import REPO_ROOT

PROMETHEUS_DIR = REPO_ROOT / "deploy" / "prometheus"


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool not found: install the Debian package `prometheus` (apt-get install prometheus)")
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=PROMETHEUS_DIR)
