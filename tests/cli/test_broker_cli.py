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
from typer.testing import CliRunner

from monitor.cli import app
from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import REPO_ROOT
from monitor.runtime.broker import EmbeddedBroker, free_port
from tests.support.s3_server import S3Server
from tests.support.topic_io import TopicTail, produce

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _start_broker(port: int, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "broker", "--port", str(port), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    lines = []
    while time.monotonic() < deadline and proc.poll() is None:
        line = proc.stdout.readline()
        lines.append(line)
        if match := re.search(r"\(pid (\d+)", line):
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


def test_s3_storage_engine_keeps_the_topics_through_a_broker_kill_9(tmp_path: Path) -> None:
    """`convmon broker --storage-engine s3://BUCKET/` on a local moto S3 server keeps acknowledged records
    when its Tansu child is SIGKILLed; a new `convmon broker` on the same bucket serves them all."""
    records = [(f"k{i}".encode(), f"record-{i}".encode()) for i in range(100)]
    with S3Server(tmp_path / "s3.log") as s3:
        port = free_port()
        proc, child = _start_broker(port, "--storage-engine", "s3://tansu/", env=s3.broker_env())
        try:
            produce(f"127.0.0.1:{port}", "kept", records)  # returns once every record is acknowledged
            os.kill(child, signal.SIGKILL)  # the broker crashes; the CLI sees its child die and exits
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode != 0 and "exited by itself" in out, out
            proc, child = _start_broker(port, "--storage-engine", "s3://tansu/", env=s3.broker_env())
            tail = TopicTail(f"127.0.0.1:{port}", "kept")
            for _ in range(3):  # a poll reads until the broker has nothing more; retry while it comes up
                tail.poll()
                if len(tail.records) >= len(records):
                    break
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            if _alive(child):
                os.kill(child, signal.SIGKILL)
    assert sorted(r.value for r in tail.records) == sorted(v for _, v in records)


def test_an_unknown_storage_engine_is_refused() -> None:
    result = CliRunner().invoke(app, ["broker", "--storage-engine", "file:///tmp/x"])
    assert result.exit_code == 2 and "use memory://NAME/ or s3://BUCKET/" in result.output


def test_a_storage_engine_the_shipped_binary_lacks_is_refused_in_one_line() -> None:
    result = CliRunner().invoke(app, ["broker", "--storage-engine", "postgres://postgres@127.0.0.1/test"])
    assert result.exit_code == 2
    assert "memory://NAME/ or s3://BUCKET/" in result.output and result.output.count("\n") == 1


def test_a_broker_that_exits_at_start_reports_its_own_error() -> None:
    with pytest.raises(ConfigError, match="FeatureNotEnabled"):
        EmbeddedBroker(storage_engine="postgres://postgres@127.0.0.1/test").start(timeout=10)
