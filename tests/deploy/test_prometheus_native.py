"""The stack of docker-compose.yml, natively: two `convmon worker` processes in one consumer group,
`convmon simulate` with a DSAT spike, and a real Prometheus (Debian package ``prometheus``)
scraping both workers with convmon's recording and alert rules. ConvmonDsatSpike must go to firing,
and Prometheus's sums across workers must equal what the workers themselves report.

Time is compressed: every duration in the rules (range windows, group intervals, ``for:``) is
divided by ``SCALE``, so "30 minutes" is 30 seconds; expressions, thresholds and the volume guard
are the real ones. The unscaled timings are covered by ``deploy/prometheus/tests`` (promtool).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from monitor.contracts.settings import REPO_ROOT
from monitor.runtime.broker import free_port
from monitor.runtime.scrape import by_label, total
from tests.workers import WorkerProcess, settings_env, wait_until

pytestmark = pytest.mark.integration

SCALE = 60
CALM_S = 75.0  # simulated seconds before the spike: the baseline
SPIKE_S = 105.0  # spike duration; the alert needs ~30 s of window + 15 s of `for:` + pipeline latency
RATE = 8.0  # conversations per second: 240 per scaled 30-minute window, above the volume guard of 100
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def scale_duration(text: str) -> str:
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"not a duration: {text}"
    seconds = sum(int(n) * UNITS[u] for n, u in parts)
    return f"{max(1, round(seconds * 1000 / SCALE))}ms"


def scale_expr(expr: str) -> str:
    """Range selectors ``[30m]``, subqueries ``[7d:5m]`` and ``offset 30m``, each divided by SCALE."""
    expr = re.sub(r"\[(\w+)(?::(\w+))?\]", lambda m: f"[{scale_duration(m.group(1))}" + (
        f":{scale_duration(m.group(2))}]" if m.group(2) else "]"), expr)
    return re.sub(r"\boffset (\w+)", lambda m: f"offset {scale_duration(m.group(1))}", expr)


def scaled_rules(out_dir: Path) -> list[Path]:
    """The real rule files with every duration divided by SCALE."""
    out = []
    for path in sorted((REPO_ROOT / "deploy" / "prometheus" / "rules").glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        for group in doc["groups"]:
            group["interval"] = scale_duration(group.get("interval", "1m"))
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = scale_duration(rule["for"])
                rule["expr"] = scale_expr(rule["expr"])
        target = out_dir / path.name
        target.write_text(yaml.safe_dump(doc, sort_keys=False))
        out.append(target)
    return out


class PrometheusProcess:
    def __init__(self, workdir: Path, targets: list[str]) -> None:
        exe = shutil.which("prometheus")
        if exe is None:
            pytest.fail("prometheus not found: install the Debian package `prometheus` (apt-get install prometheus)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        rules = scaled_rules(workdir)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in rules],
            "scrape_configs": [{"job_name": "convmon", "static_configs": [{"targets": targets}]}],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log_path = workdir / "prometheus.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [exe, f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        wait_until(lambda: httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200, timeout=30,
                   message=f"prometheus ready\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def query(self, expr: str) -> list[dict[str, Any]]:
        body = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=5).json()
        assert body["status"] == "success", body
        return body["data"]["result"]

    def alerts(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.url}/api/v1/alerts", timeout=5).json()["data"]["alerts"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_scaled_rules_keep_expressions_and_divide_durations(tmp_path: Path) -> None:
    assert scale_duration("30m") == "30000ms" and scale_duration("7d") == "10080000ms"
    assert scale_duration("1h30m") == "90000ms"
    rules = {r.get("alert") or r["record"]: r for p in scaled_rules(tmp_path)
             for g in yaml.safe_load(p.read_text())["groups"] for r in g["rules"]}
    spike = rules["ConvmonDsatSpike"]
    assert spike["for"] == "15000ms" and ">= 100" in spike["expr"] and "> 3" in spike["expr"]
    assert "[30000ms]" in rules["rubric:convmon_rubric_verdicts:increase30m"]["expr"]
    assert "[10080000ms:5000ms] offset 30000ms" in rules["rubric:convmon_rubric_verdicts:count7d"]["expr"]


def test_two_workers_dsat_spike_fires_and_sums_across_workers(broker: str, make_settings, tmp_path: Path) -> None:
    # no OpenAI settings (tests/conftest.py clears them): the simulator's ground truth is the judge here
    base = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=5.0, registry_poll_s=1.0)
    workers = [
        WorkerProcess(base.model_copy(update={"data_dir": tmp_path / f"w{i}"}), tmp_path / f"worker-{i}.log")
        for i in (1, 2)
    ]
    prometheus: PrometheusProcess | None = None
    sim: subprocess.Popen[str] | None = None
    try:
        for w in workers:
            w.start(timeout=120)
        prom_dir = tmp_path / "prometheus"
        prom_dir.mkdir()
        prometheus = PrometheusProcess(prom_dir, [f"127.0.0.1:{w.port}" for w in workers])
        wait_until(lambda: len(prometheus.query('up{job="convmon"} == 1')) == 2, timeout=30,
                   message="both workers scraped")

        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
        env.update(settings_env(base))
        sim = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "simulate", "--rate", str(RATE), "--duration",
             str(CALM_S + SPIKE_S), "--dsat-spike-at", str(CALM_S), "--turn-gap", "0.1", "--seed", "3"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        spike_starts = time.time() + CALM_S

        def spike_firing() -> list[dict[str, Any]]:
            return [a for a in prometheus.alerts() if a["labels"]["alertname"] == "ConvmonDsatSpike"
                    and a["state"] == "firing"]

        wait_until(lambda: bool(spike_firing()), timeout=CALM_S + SPIKE_S + 30, interval=1.0,
                   message="ConvmonDsatSpike firing")
        firing = spike_firing()
        for alert in firing:
            assert alert["labels"]["polarity"] == "dsat" and alert["labels"]["scorer"] == "llm"
            assert alert["labels"]["severity"] == "page"
            active_at = datetime.fromisoformat(alert["activeAt"].replace("Z", "+00:00")).timestamp()
            assert active_at >= spike_starts - 2, alert  # pending since the spike, not calm-phase noise

        out, _ = sim.communicate(timeout=CALM_S + SPIKE_S + 60)
        assert sim.returncode == 0, out
        produced = int(re.search(r"for (\d+) conversations", out).group(1))

        # Drain, then compare: Prometheus's sums over workers == each worker's own /metrics, summed.
        def scored_by_workers() -> float:
            return sum(total(w.samples(), "convmon_conversations_scored_total", scorer="llm") for w in workers)

        wait_until(lambda: scored_by_workers() == produced, timeout=60, message=f"{produced} conversations scored")
        time.sleep(3)  # a few scrapes
        per_worker = [w.samples() for w in workers]
        assert all(w.alive() for w in workers)
        own = [total(s, "convmon_conversations_scored_total", scorer="llm") for s in per_worker]
        assert all(n > 0 for n in own), f"one worker did all the work: {own}"  # both hold partitions
        assert sum(own) == produced
        summed = prometheus.query('sum(convmon_conversations_scored_total{scorer="llm"})')
        assert float(summed[0]["value"][1]) == produced
        by_instance = {r["metric"]["instance"]: float(r["value"][1]) for r in prometheus.query(
            'sum by (instance) (convmon_conversations_scored_total{scorer="llm"})')}
        assert by_instance == {f"127.0.0.1:{w.port}": n for w, n in zip(workers, own, strict=True)}
        yes_prom = {r["metric"]["rubric"]: float(r["value"][1]) for r in prometheus.query(
            'sum by (rubric) (convmon_rubric_verdicts_total{scorer="llm", verdict="yes"})')}
        yes_workers: dict[str, float] = {}
        for samples in per_worker:
            for rubric, n in by_label(samples, "convmon_rubric_verdicts_total", "rubric", scorer="llm",
                                      verdict="yes").items():
                yes_workers[rubric] = yes_workers.get(rubric, 0) + n
        assert yes_prom and {k: v for k, v in yes_prom.items() if v} == {k: v for k, v in yes_workers.items() if v}
    finally:
        if sim is not None and sim.poll() is None:
            sim.kill()
            sim.wait()
        if prometheus is not None:
            prometheus.stop()
        for w in workers:
            w.stop()
