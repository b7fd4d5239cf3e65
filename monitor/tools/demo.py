"""`convmon demo`: the whole monitor on one machine in about a minute.

It starts the embedded broker, a worker process and the simulator (with a DSAT spike half-way),
and renders per-rubric SAT/DSAT rates, judge vs distilled, from the worker's own /metrics, i.e.
exactly what Prometheus would scrape. Without OPENAI_API_KEY / OPENAI_BASE_URL the judge is the
simulator's ground truth, labelled "simulated" everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import Settings
from monitor.runtime.broker import EmbeddedBroker, free_port, stop_process
from monitor.runtime.scrape import Sample, by_label, scrape, total, wait_for_metrics
from monitor.tools.simulator.run import SimulationPlan, simulate

console = Console()


def _worker_env(settings: Settings, broker_url: str, workdir: Path, metrics_port: int) -> dict[str, str]:
    return {
        **os.environ,
        "CONVMON_BROKER_URL": broker_url,
        "CONVMON_APP_ID": f"convmon-demo-{int(time.time())}",
        "CONVMON_MODEL_REGISTRY": str(workdir / "models"),
        "CONVMON_LABEL_STORE_URL": f"sqlite:///{workdir / 'labels.db'}",
        "CONVMON_METRICS_PORT": str(metrics_port),
        "CONVMON_SAMPLE_RATE": os.environ.get("CONVMON_SAMPLE_RATE", "0.5"),
        "CONVMON_RETRAIN_CRON": "* * * * * */8",  # the retrainer's schedule: every 8 s (6th field: seconds)
        "CONVMON_RETRAIN_METRICS_PORT": str(free_port()),
        "CONVMON_CALIBRATION_MIN_LABELS": "0",  # a calibration round takes minutes on a laptop
        "CONVMON_DISTILL_REPORT_DIR": str(workdir / "reports"),
        "CONVMON_RETRAIN_MIN_LABELS": "40",
        "CONVMON_DISTILL_MIN_POSITIVES": "5",
        "CONVMON_REGISTRY_POLL_S": "2",
        "CONVMON_IDLE_TIMEOUT_S": "10",
    }


def render(samples: list[Sample], rubric: RubricSet, judge_name: str, elapsed: float) -> Group:
    scored = by_label(samples, "convmon_conversations_scored_total", "scorer")
    n_llm, n_dist = scored.get("llm", 0.0), scored.get("distilled", 0.0)
    head = Table.grid(padding=(0, 2))
    head.add_row(
        f"t={elapsed:4.0f}s",
        f"events {total(samples, 'convmon_events_total'):.0f}",
        f"conversations {total(samples, 'convmon_conversations_finished_total'):.0f}",
        f"judged [{judge_name}] {n_llm:.0f}",
        f"distilled {n_dist:.0f}",
        f"unscored {total(samples, 'convmon_conversations_unscored_total'):.0f}",
        f"dead letters {total(samples, 'convmon_dead_letters_total'):.0f}",
    )
    table = Table(title="per-rubric rates: share of conversations showing each pattern")
    for col in ("item", "polarity", f"judge ({judge_name})", "distilled (expected)"):
        table.add_column(col, justify="left" if col in ("item", "polarity") else "right")
    yes = by_label(samples, "convmon_rubric_verdicts_total", "rubric", scorer="llm", verdict="yes")
    prob = by_label(samples, "convmon_rubric_probability_sum_total", "rubric", scorer="distilled")
    # Records carry only the items the live model was able to train; count them per item.
    dist_n = by_label(samples, "convmon_rubric_verdicts_total", "rubric", scorer="distilled")
    for item in rubric.items:
        judge_rate = f"{yes.get(item.id, 0) / n_llm:6.1%}" if n_llm else "-"
        if dist_n.get(item.id):
            dist_rate = f"{prob.get(item.id, 0) / dist_n[item.id]:6.1%}"
        else:
            dist_rate = "not trained yet" if n_dist else "-"
        style = "green" if item.polarity == "sat" else "red"
        table.add_row(f"[{style}]{item.id}[/{style}]", item.polarity, judge_rate, dist_rate)
    return Group(head, table)


async def _live(
    url: str, rubric: RubricSet, judge_name: str, sim: asyncio.Task[object], duration_s: float
) -> list[Sample]:
    started = time.monotonic()
    samples: list[Sample] = []
    with Live(console=console, refresh_per_second=2) as live:
        while time.monotonic() - started < duration_s + 15:
            with contextlib.suppress(httpx.HTTPError):
                samples = await asyncio.to_thread(scrape, url)
            live.update(render(samples, rubric, judge_name, time.monotonic() - started))
            if sim.done() and time.monotonic() - started > duration_s + 5:
                break  # a few seconds after the last events, so the tail is scored
            await asyncio.sleep(1.0)
    return samples


def run_demo(settings: Settings, *, duration_s: float, rate: float, metrics_port: int) -> None:
    workdir = settings.data_dir / "demo"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    judge_name = f"openai:{settings.judge_model}" if settings.judge_configured else "simulated"
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        sim_settings = settings.model_copy(update={"broker_url": broker.url})
        log = (workdir / "worker.log").open("wb")
        env = _worker_env(settings, broker.url, workdir, metrics_port)
        proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "worker"], stdout=log, stderr=subprocess.STDOUT,
                                env=env)
        # the deployment's one retrainer, in its own process as in production (`convmon retrain`)
        retrain_log = (workdir / "retrain.log").open("wb")
        retrainer = subprocess.Popen([sys.executable, "-m", "monitor.cli", "retrain"], stdout=retrain_log,
                                     stderr=subprocess.STDOUT, env=env)
        try:
            console.print(f"broker {broker.url} · worker metrics {url} · logs in {workdir}")
            wait_for_metrics(url, proc, log_path=workdir / "worker.log")
            plan = SimulationPlan(rate=rate, duration_s=duration_s, dsat_spike_at_s=duration_s / 2, spike_factor=4.0)

            async def main() -> list[Sample]:
                sim = asyncio.create_task(simulate(sim_settings, rubric, plan))
                samples = await _live(url, rubric, judge_name, sim, duration_s)
                stats = await sim
                console.print(f"simulated {stats.conversations} conversations, {stats.events} events; "
                              f"DSAT spike x{plan.spike_factor} from t={plan.dsat_spike_at_s:.0f}s")
                return samples

            samples = asyncio.run(main())
            console.print(render(samples, rubric, judge_name, duration_s))
            console.print(f"models: {sorted(p.name for p in (workdir / 'models' / 'distilled').glob('2*'))}"
                          if (workdir / "models" / "distilled").exists() else "models: none trained")
        finally:
            stop_process(retrainer)
            stop_process(proc)
            retrain_log.close()
            log.close()
