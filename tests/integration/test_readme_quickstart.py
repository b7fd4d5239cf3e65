"""The README's "Monitor your own assistant" works when pasted: its code blocks, run in order on a fresh broker,
end with per-item rates and distilled scores on /metrics for the quickstart's own events.

The blocks run as written, with two changes a shared test machine needs: the ports (9092 broker, 8000 judge,
9100 metrics) become free ones, and `convmon broker` gets `--port`. A block whose first line is
``# terminal N: ...`` is long-running (broker, stand-in judge, worker) and starts in the background; a Python
block is saved under the file name its first comment gives (``# send.py: ...``); every other block runs to
completion with ``bash -e``. Between blocks the test waits for what a reader would wait for (the worker's
/metrics, the judge's scores, the labels) instead of sleeping blindly.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from monitor.contracts.settings import REPO_ROOT
from monitor.runtime.broker import free_port
from monitor.runtime.scrape import by_label, scrape, total
from tests.support.workers import wait_until

pytestmark = pytest.mark.integration

SECTION = "## Monitor your own assistant"
BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.S)
SENT = 150 * 2 + 1  # send.py twice, and the replayed file's conversation


def quickstart_blocks() -> list[tuple[str, str]]:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    return BLOCK.findall(readme[start:end if end > 0 else None])


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Session:
    """The reader's terminals: background processes in their own process groups, and one-shot blocks."""

    def __init__(self, cwd: Path, ports: dict[str, int]) -> None:
        self.cwd, self.ports = cwd, ports
        self.background: list[subprocess.Popen[bytes]] = []
        venv_bin = str(Path(sys.executable).parent)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVMON_", "OPENAI_"))}
        self.env |= {"PATH": f"{venv_bin}:{self.env.get('PATH', '')}", "PYTHONPATH": str(REPO_ROOT),
                     "CONVMON_BROKER_URL": f"kafka://127.0.0.1:{ports['9092']}",
                     "CONVMON_METRICS_PORT": str(ports["9100"]), "CONVMON_UI_PORT": str(ports.get("8050", 8050)),
                     "COLUMNS": "200"}

    def localize(self, code: str) -> str:
        for port, free in self.ports.items():
            code = code.replace(port, str(free))
        return re.sub(r"^convmon broker$", f"convmon broker --port {self.ports['9092']}", code, flags=re.M)

    def start(self, code: str, name: str) -> subprocess.Popen[bytes]:
        log = (self.cwd / f"{name}.log").open("ab")
        proc = subprocess.Popen(["bash", "-e", "-c", self.localize(code)], cwd=self.cwd, env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append(proc)
        return proc

    def run(self, code: str, timeout: float = 180.0) -> str:
        result = subprocess.run(["bash", "-e", "-c", self.localize(code)], cwd=self.cwd, env=self.env,
                                capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, f"block failed ({result.returncode}):\n{code}\n{result.stdout}{result.stderr}"
        return result.stdout

    def log(self, name: str) -> str:
        path = self.cwd / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self) -> None:
        for proc in reversed(self.background):  # worker, judge, then broker
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    s = Session(tmp_path, {"9092": free_port(), "8000": free_port(), "9100": free_port(), "8050": free_port()})
    try:
        yield s
    finally:
        s.stop()


def test_the_quickstart_blocks_parse_as_expected() -> None:
    blocks = quickstart_blocks()
    terminals = [code.splitlines()[0] for lang, code in blocks if code.startswith("# terminal")]
    assert terminals == ["# terminal 1: the broker", "# terminal 2: the stand-in judge", "# terminal 3: the worker",
                         "# terminal 4: the review page"]
    assert [lang for lang, _ in blocks].count("python") == 1
    assert any("convmon replay" in code for _, code in blocks)
    assert any("convmon retrain --once" in code for _, code in blocks)


def test_the_readme_quickstart_ends_with_rates_and_distilled_scores(session: Session) -> None:
    metrics = f"http://127.0.0.1:{session.ports['9100']}/metrics"
    outputs: list[str] = []

    def scored(scorer: str) -> float:
        return total(scrape(metrics), "convmon_conversations_scored_total", scorer=scorer)

    for lang, code in quickstart_blocks():
        first = code.splitlines()[0]
        if lang == "python":
            name = re.match(r"# (\S+\.py):", first)
            assert name, f"a Python block must start with '# <file>.py: ...': {first}"
            (session.cwd / name.group(1)).write_text(session.localize(code), encoding="utf-8")
        elif first.startswith("# terminal"):
            name = first.split(":")[1].strip().replace(" ", "-")
            proc = session.start(code, name)
            if "convmon broker" in code:
                wait_until(lambda: _port_open(session.ports["9092"]), 60, message="the broker")
            elif "openai_server" in code:
                wait_until(lambda: _port_open(session.ports["8000"]), 60, message="the stand-in judge")
            elif "convmon ui" in code:  # the flagged conversations of the judged traffic so far
                page = f"http://127.0.0.1:{session.ports['8050']}/flagged?item=dsat.negative_feedback&window=1h"
                wait_until(lambda: _port_open(session.ports["8050"]), 60, message=f"the review page\n"
                           f"{session.log(name)}")
                flagged_page = httpx.get(page, timeout=10).text
                assert flagged_page.count('class="row"') >= 10 and "ref-" in flagged_page
            elif "convmon worker" in code:
                wait_until(lambda p=proc: p.poll() is None and httpx.get(metrics, timeout=1).status_code == 200, 120,
                           message=f"the worker's /metrics\n{session.log(name)}")
        else:
            if "curl" in code and "distilled" not in code:  # the reader looks once the judge has scored
                wait_until(lambda: scored("llm") >= 151, 120, interval=2,
                           message=f"151 judged conversations\n{session.log('the-worker')}")
            if "curl" in code and "distilled" in code:  # ... and once the second send.py has been classified
                wait_until(lambda: scored("distilled") >= 150 and scored("llm") >= SENT, 120, interval=2,
                           message=f"the second send.py scored by both scorers\n{session.log('the-worker')}")
            if "convmon retrain --once" in code:  # ... and retrains once the labels are stored
                wait_until(lambda: _labels(session.cwd) >= 151, 60, interval=2, message="151 stored labels")
            outputs.append(session.run(code))

    joined = "\n".join(outputs)
    assert 'convmon_rubric_verdicts_total{' in joined and 'scorer="llm"' in joined
    assert 'scorer="distilled"' in outputs[-1]  # the last block, as the reader sees it
    samples = scrape(metrics)
    judged = by_label(samples, "convmon_rubric_verdicts_total", "rubric", scorer="llm", verdict="yes")
    assert judged.get("sat.gratitude", 0) >= 10 and judged.get("dsat.negative_feedback", 0) >= 10
    distilled = by_label(samples, "convmon_rubric_verdicts_total", "rubric", scorer="distilled", verdict="yes")
    assert sum(distilled.values()) > 0, distilled
    assert total(samples, "convmon_conversations_scored_total", scorer="llm") >= SENT
    assert total(samples, "convmon_judge_configured") == 1
    assert total(samples, "convmon_dead_letters_total") == 0
    # send.py's metadata shows as itself under the worker's settings, not as "other"
    assert total(samples, "convmon_conversations_scored_total", scorer="llm", app="web") >= 300
    assert total(samples, "convmon_dimension_overflow_total", dimension="app") == 0
    assert not [name for name, _, _ in samples if name.endswith("_created")]  # a smaller, faster exposition


def _labels(cwd: Path) -> int:
    path = cwd / "var" / "labels.db"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        table = next((t for t in tables if "label" in t and "budget" not in t and "human" not in t), None)
        return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) if table else 0  # noqa: S608
