"""The stack of docker-compose.yml, natively: two `convmon worker` processes in one consumer group,
`convmon simulate` with a DSAT spike, and a real Prometheus (Debian package ``prometheus``)
scraping both workers with convmon's recording and alert rules. ConvmonDsatSpike must go to firing, the
corrected rate (a distilled model is live) must be recorded for the items it fires on, and Prometheus's sums
across workers must equal what the workers themselves report.

Time is compressed (monitor/tools/shipped_alerts.py, as in the demo): every duration in the rules
(range windows, group intervals, ``for:``) is divided by ``SCALE``, so "30 minutes" is 15 seconds;
expressions, thresholds and the volume guard are the real ones. The unscaled timings are covered by
``deploy/prometheus/tests`` (promtool).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.contracts.rubric_set import load_rubric_set
from monitor.runtime.scrape import by_label, total
from monitor.tools.local_prometheus import LocalPrometheus, prometheus_binary
from monitor.tools.shipped_alerts import scale_duration, scaled_rule_files
from tests.support.model_fixtures import publish_distilled_model
from tests.support.workers import WorkerProcess, settings_env, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long]

SCALE = 120  # as the demo: "30 minutes" is 15 seconds
CALM_S = 30.0  # simulated seconds before the spike: the baseline, two of the 7-day subquery's 15 s steps
SPIKE_S = 40.0  # the alert fired 20 s into the spike (15 s of window, 7.5 s of `for:`, pipeline latency)
RATE = 10.0  # conversations per second: 150 per scaled 30-minute window, above the volume guard of 100


def test_scaled_rules_keep_expressions_and_divide_durations(tmp_path: Path) -> None:
    assert scale_duration("30m", 60) == "30000ms" and scale_duration("7d", 60) == "10080000ms"
    assert scale_duration("1h30m", 60) == "90000ms" and scale_duration("30m", 120) == "15000ms"
    rules = {r.get("alert") or r["record"]: r for p in scaled_rule_files(tmp_path, SCALE)
             for g in yaml.safe_load(p.read_text())["groups"] for r in g["rules"]}
    spike = rules["ConvmonDsatSpike"]
    assert spike["for"] == "7500ms" and ">= 100" in spike["expr"] and "> 3" in spike["expr"]
    assert "[15000ms]" in rules["rubric_verdict:convmon_rubric_verdicts:increase30m"]["expr"]
    assert "[5040000ms:15000ms] offset 15000ms" in rules["rubric:convmon_rubric_verdicts:count7d"]["expr"]


def test_two_workers_dsat_spike_fires_and_sums_across_workers(broker: str, make_settings, tmp_path: Path) -> None:
    # no OpenAI settings (tests/conftest.py clears them): the simulator's ground truth is the judge here
    base = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=5.0, registry_poll_s=1.0)
    # a live distilled model: every judged conversation then carries its probabilities (the corrected rate's terms)
    publish_distilled_model(base, load_rubric_set(base.rubric_set, base.prompts_dir))
    workers = [
        WorkerProcess(base.model_copy(update={"data_dir": tmp_path / f"w{i}"}), tmp_path / f"worker-{i}.log")
        for i in (1, 2)
    ]
    prometheus: LocalPrometheus | None = None
    sim: subprocess.Popen[str] | None = None
    try:
        with ThreadPoolExecutor(len(workers)) as pool:  # side by side: each spends seconds importing
            list(pool.map(lambda w: w.start(timeout=120), workers))
        prom_dir = tmp_path / "prometheus"
        prom_dir.mkdir()
        exe = prometheus_binary()
        if exe is None:
            pytest.fail("prometheus not found: install the Debian package `prometheus` (apt-get install prometheus)")
        prometheus = LocalPrometheus(exe, prom_dir, [f"127.0.0.1:{w.port}" for w in workers], SCALE).start()
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
            return [a for a in prometheus.alerts(timeout=5) if a["labels"]["alertname"] == "ConvmonDsatSpike"
                    and a["state"] == "firing"]

        wait_until(lambda: bool(spike_firing()), timeout=CALM_S + SPIKE_S + 30, interval=1.0,
                   message="ConvmonDsatSpike firing")
        firing = spike_firing()
        # the corrected rate of the same traffic, from the real rules over the workers' partition totals: with
        # pi = 1 (every conversation judged) it has no sampling variance from the slice, only theta (1 - theta) / N
        corrected = {r["metric"]["rubric"]: float(r["value"][1]) for r in prometheus.query(
            'rubric:convmon_rubric_corrected:ratio_rate30m{polarity="dsat"}')}
        stderr = {r["metric"]["rubric"]: float(r["value"][1]) for r in prometheus.query(
            'rubric:convmon_rubric_corrected:stderr_rate30m{polarity="dsat"}')}
        assert {a["labels"]["rubric"] for a in firing} <= set(corrected), (firing, corrected)
        assert all(0.0 <= v <= 1.0 for v in corrected.values()) and set(stderr) == set(corrected), (corrected, stderr)
        assert all(0.0 <= se < 0.1 for se in stderr.values()), stderr  # 0 for an item the judge never says yes to
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
        per_worker = [w.samples() for w in workers]
        assert all(w.alive() for w in workers)
        own = [total(s, "convmon_conversations_scored_total", scorer="llm") for s in per_worker]
        assert all(n > 0 for n in own), f"one worker did all the work: {own}"  # both hold partitions
        assert sum(own) == produced

        yes_workers: dict[str, float] = {}
        for samples in per_worker:
            for rubric, n in by_label(samples, "convmon_rubric_verdicts_total", "rubric", scorer="llm",
                                      verdict="yes").items():
                yes_workers[rubric] = yes_workers.get(rubric, 0) + n
        expected = (float(produced), {f"127.0.0.1:{w.port}": n for w, n in zip(workers, own, strict=True)},
                    {k: v for k, v in yes_workers.items() if v})

        def prometheus_view() -> tuple[float | None, dict[str, float], dict[str, float]]:
            summed = prometheus.query('sum(convmon_conversations_scored_total{scorer="llm"})')
            by_instance = {r["metric"]["instance"]: float(r["value"][1]) for r in prometheus.query(
                'sum by (instance) (convmon_conversations_scored_total{scorer="llm"})')}
            yes_prom = {r["metric"]["rubric"]: float(r["value"][1]) for r in prometheus.query(
                'sum by (rubric) (convmon_rubric_verdicts_total{scorer="llm", verdict="yes"})')}
            return (float(summed[0]["value"][1]) if summed else None, by_instance,
                    {k: v for k, v in yes_prom.items() if v})

        # a few scrapes: on a loaded machine one can time out and leave a worker's series stale until the next
        assert expected[2], "no yes verdicts at all"
        wait_until(lambda: prometheus_view() == expected, timeout=30,
                   message=f"Prometheus to hold each worker's own counts {expected} ({prometheus_view()})")
    finally:
        if sim is not None and sim.poll() is None:
            sim.kill()
            sim.wait()
        if prometheus is not None:
            prometheus.stop()
        for w in workers:
            w.stop()
