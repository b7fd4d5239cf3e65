"""`convmon broker` stops its Tansu child on SIGTERM and SIGINT: a real subprocess, a real child."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monitor.contracts.settings import REPO_ROOT
from monitor.runtime.broker import free_port

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _start_broker(port: int) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "broker", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    lines = []
    while time.monotonic() < deadline and proc.poll() is None:
        line = proc.stdout.readline()
        lines.append(line)
        if match := re.search(r"\(pid (\d+)\)", line):
            child = int(match.group(1))
            ppid = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1]
            if _alive(child) and ppid == str(proc.pid):
                return proc, child
            break
    proc.terminate()  # SIGTERM: the handler under test also stops any child it started
    proc.wait(timeout=30)
    pytest.fail(f"the broker did not come up with its own child: {''.join(lines)}")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_tansu_child(sig: signal.Signals) -> None:
    port = free_port()
    proc, child = _start_broker(port)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass  # the child serves the port
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert f"broker stopped ({sig.name})" in out
        assert not _alive(child), f"the Tansu child {child} survived {sig.name}"
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_control_sigkill_of_the_cli_orphans_the_child() -> None:
    """The test can fail: a parent that cannot run its handler (SIGKILL) leaves the child behind."""
    proc, child = _start_broker(free_port())
    try:
        proc.kill()
        proc.wait(timeout=10)
        time.sleep(0.2)
        assert _alive(child)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
