"""A real Prometheus process on this machine, scraping convmon with the shipped rule files.

The one runner behind the demo and the tests that need Prometheus's own arithmetic (sums across
workers, ``increase()``, alerts firing): it writes a config, starts ``prometheus`` on a free port,
waits until it is ready and answers instant queries. The rules are the shipped ones, time-compressed
by ``scale`` (:func:`monitor.tools.shipped_alerts.scaled_rule_files`).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from monitor.contracts.errors import ConfigError
from monitor.runtime.broker import free_port, stop_process
from monitor.runtime.scrape import local_http
from monitor.tools.shipped_alerts import RULES_DIR, scaled_rule_files


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


class LocalPrometheus:
    """Scrapes ``targets`` every ``scrape_s`` seconds with the shipped rules divided by ``scale``.

    The scrape timeout is the whole interval (Prometheus's default would be 10 s, capped at the interval):
    a worker's /metrics under load must answer within it, and :meth:`failed_scrapes` says when it did not.

    ``evaluate_every_scrape`` evaluates every rule group at the scrape interval instead of its own
    (scaled) one, so recording rules stay as current as the samples.
    """

    def __init__(self, exe: str, workdir: Path, targets: list[str], scale: float = 1.0, *, scrape_s: float = 1.0,
                 evaluate_every_scrape: bool = False) -> None:
        self.exe = exe
        self.workdir = workdir.resolve()  # Prometheus resolves rule_files against its config's folder
        self.targets = targets
        self.scale = scale
        self.scrape_s = scrape_s
        self.evaluate_every_scrape = evaluate_every_scrape
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workdir / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> LocalPrometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        interval = f"{round(self.scrape_s * 1000)}ms"
        rules = scaled_rule_files(self.workdir, self.scale,
                                  group_interval=interval if self.evaluate_every_scrape else None)
        if not rules:
            raise ConfigError(f"no rule files in {RULES_DIR}: run from a source checkout")
        config = {
            "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
            "rule_files": [str(p) for p in rules],
            "scrape_configs": [{"job_name": "convmon", "static_configs": [{"targets": self.targets}]}],
        }
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [self.exe, f"--config.file={self.workdir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ConfigError(f"prometheus exited with code {self.proc.returncode}; see {self.log_path}")
            try:
                if local_http().get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise ConfigError(f"prometheus did not become ready in {timeout:.0f}s; see {self.log_path}")

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query (at wall-clock ``at``, else now); the result vector."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        body = local_http().get(f"{self.url}/api/v1/query", params=params, timeout=30).json()
        if body.get("status") != "success":
            raise ConfigError(f"prometheus rejected the query {expr!r}: {body.get('error', body)}")
        return list(body["data"]["result"])

    def rule_names(self) -> set[str]:
        """The alert and recording rules Prometheus has loaded (a rule file it cannot find is silently empty)."""
        body = local_http().get(f"{self.url}/api/v1/rules", timeout=5).json()
        return {r["name"] for g in body["data"]["groups"] for r in g["rules"]}

    def alerts(self, timeout: float = 2.0) -> list[dict[str, Any]]:
        body = local_http().get(f"{self.url}/api/v1/alerts", timeout=timeout).json()
        return list(body["data"]["alerts"])

    def failed_scrapes(self) -> int:
        """Scrapes of the targets that failed so far (timeouts, refused connections): ``up`` was 0."""
        result = self.query('sum(count_over_time(up{job="convmon"}[1d]) - sum_over_time(up{job="convmon"}[1d]))')
        return int(float(result[0]["value"][1])) if result else 0

    def log(self) -> str:
        """The end of Prometheus's own log, for failure messages."""
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.is_file() else ""

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def __enter__(self) -> LocalPrometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
