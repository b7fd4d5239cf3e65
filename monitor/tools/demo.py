"""`convmon demo`: the whole monitor on one machine in two to three minutes.

It starts the embedded broker, a worker process and the simulator (with a DSAT spike half-way), and
shows per-rubric rates over a recent window beside the run's baseline, read from the worker's own
/metrics, i.e. exactly what Prometheus would scrape. As in production the judge sees a slice (a quarter)
and the distilled classifiers score every conversation: the first model is trained before the traffic
starts (production has yesterday's), the retrainer trains new ones from the judge's labels during the run.
When the ``prometheus`` binary is installed, a real Prometheus scrapes the worker with the shipped rule
files (durations compressed, expressions as shipped) and the screen shows the two DSAT-spike alerts' state:
on the corrected distilled rate (the headline) and on the judged slice alone. At the end it writes a PNG of
the rates. Without OPENAI_API_KEY / OPENAI_BASE_URL the judge is the simulator's ground truth, labelled
"simulated" everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from rich.console import Console
from rich.live import Live

from distill.registry import ModelRegistry
from monitor.contracts.errors import ConfigError
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.runtime.broker import EmbeddedBroker, free_port, stop_process
from monitor.runtime.scrape import wait_for_metrics
from monitor.tools.demo_plot import plot_rates
from monitor.tools.demo_rates import Counts, RateHistory, scrape_counts
from monitor.tools.demo_view import LAG_WARN, TREND_STEP_S, Health, View, render
from monitor.tools.local_prometheus import LocalPrometheus, prometheus_binary
from monitor.tools.shipped_alerts import AlertState, alert_state, firing_episodes, rule_file_of
from monitor.tools.simulator.generate import APPS
from monitor.tools.simulator.run import SimulationPlan, SimulationStats, simulate
from monitor.tools.simulator.training import publish_simulated_model

console = Console()
# scorer label of the alert's series -> the shipped alert: the headline first
ALERTS = {"corrected": "ConvmonDsatSpikeCorrected", "llm": "ConvmonDsatSpike"}
ALERT = ALERTS["corrected"]
ALERT_NAMES = " / ".join(ALERTS.values())
RATE_NAMES = {"corrected": "corrected distilled", "llm": "judge"}
SAMPLE_RATE = 0.25  # the judged slice; the distilled path scores every conversation
FIRST_MODEL_CONVERSATIONS = 400  # the simulated judge-labelled conversations the first model is trained on
RETRAIN_INTERVAL_S = 8
RETRAIN_MIN_LABELS = 40
MIN_POSITIVES = 5
RETRAIN_NICENESS = 10
REGISTRY_POLL_S = 2
SCRAPE_S = 2.0  # the demo Prometheus's scrape interval and timeout (see _start_prometheus)


@dataclass
class DemoResult:
    history: RateHistory
    alert_timeline: list[tuple[float, AlertState]] = field(default_factory=list)  # every reading
    alert: AlertState | None = None  # the last state read; None when no Prometheus ran

    def fired(self) -> dict[str, list[tuple[float, tuple[str, ...]]]]:
        """Per scorer with any, the starts of the alert's firing runs and their series."""
        runs = {scorer: firing_episodes(self.alert_timeline, scorer) for scorer in ALERTS}
        return {scorer: episodes for scorer, episodes in runs.items() if episodes}
    plot: Path | None = None
    simulated: SimulationStats | None = None
    health: Health = field(default_factory=Health)  # the last reading
    max_lag: float = 0.0  # the worker's largest lag during the run


def _worker_env(broker_url: str, workdir: Path, metrics_port: int) -> dict[str, str]:
    return {
        **os.environ,
        "CONVMON_BROKER_URL": broker_url,
        "CONVMON_APP_ID": f"convmon-demo-{int(time.time())}",
        "CONVMON_MODEL_REGISTRY": str(workdir / "models"),
        "CONVMON_LABEL_STORE_URL": f"sqlite:///{workdir / 'labels.db'}",
        "CONVMON_METRICS_PORT": str(metrics_port),
        "CONVMON_SAMPLE_RATE": os.environ.get("CONVMON_SAMPLE_RATE", str(SAMPLE_RATE)),
        "CONVMON_RETRAIN_CRON": f"* * * * * */{RETRAIN_INTERVAL_S}",  # the retrainer: every 8 s (6th field: seconds)
        "CONVMON_RETRAIN_METRICS_PORT": str(free_port()),
        "CONVMON_CALIBRATION_MIN_LABELS": "0",  # a calibration round takes minutes on a laptop
        "CONVMON_DISTILL_REPORT_DIR": str(workdir / "reports"),
        "CONVMON_RETRAIN_MIN_LABELS": str(RETRAIN_MIN_LABELS),
        "CONVMON_DISTILL_MIN_POSITIVES": str(MIN_POSITIVES),
        "CONVMON_REGISTRY_POLL_S": str(REGISTRY_POLL_S),
        "CONVMON_IDLE_TIMEOUT_S": "10",
        # One dimension, app, with the simulator's values (an allow-list), so the per-app panels fill. Each dimension
        # multiplies the per-item series: all three (27 combinations, 4 partitions, the corrected rate's seven
        # series per item) made /metrics too big to render within the 2 s scrape on a busy 2-core machine.
        "CONVMON_METRIC_DIMENSIONS": json.dumps(["app"]),
        "CONVMON_DIMENSION_VALUES": json.dumps({"app": list(APPS)}),
    }


def start_processes(broker_url: str, workdir: Path, metrics_port: int) -> list[subprocess.Popen[bytes]]:
    """Every convmon process the demo runs beside the simulator, the worker first (it serves /metrics).

    Each writes ``<workdir>/<name>.log``. A process added here is stopped with the others.
    """
    env = _worker_env(broker_url, workdir, metrics_port)
    procs = []
    # the deployment's one retrainer runs in its own process, as in production (`convmon retrain`)
    for name, argv in (("worker", ["worker"]), ("retrain", ["retrain"])):
        with (workdir / f"{name}.log").open("wb") as log:
            procs.append(subprocess.Popen([sys.executable, "-m", "monitor.cli", *argv], stdout=log,
                                          stderr=subprocess.STDOUT, env=env))
    # training is a batch job: on a busy laptop it yields the CPU to the worker, which must answer its scrapes
    # (production runs it as its own pod or CronJob for the same reason)
    os.setpriority(os.PRIO_PROCESS, procs[1].pid, RETRAIN_NICENESS)
    return procs


def _how_to_see_alert(rule: str, reason: str) -> str:
    return (f"{reason}, so {' and '.join(ALERTS.values())} ({rule}) are not evaluated here. To see them: install "
            f"Prometheus (Debian/Ubuntu: "
            f"apt-get install prometheus) and rerun, or `docker compose up -d` and open http://localhost:9090/alerts; "
            f"`promtool test rules deploy/prometheus/tests/*.yml` runs the rules' unit tests")


def _start_prometheus(workdir: Path, target: str, scale: float) -> tuple[LocalPrometheus | None, str]:
    """A Prometheus on the shipped rules, or None and a sentence saying how to see the alert."""
    try:
        rule = str(rule_file_of(ALERT).relative_to(REPO_ROOT))
    except ConfigError as exc:
        return None, f"{exc} (run the demo from a source checkout to evaluate it)"
    exe = prometheus_binary()
    if exe is None:
        return None, _how_to_see_alert(rule, "prometheus is not installed")
    # every 2 s, not every second: the worker renders its whole /metrics (about 4,300 series) for each scrape,
    # and at 1 s a busy 2-core machine failed a third of them; the 30-minute windows are 15 s, still 7 scrapes
    prom = LocalPrometheus(exe, workdir / "prometheus", [target], scale, scrape_s=SCRAPE_S).start()
    missing = [name for name in ALERTS.values() if name not in prom.rule_names()]
    if missing:
        prom.stop()
        return None, _how_to_see_alert(rule, f"Prometheus did not load {', '.join(missing)} (see {prom.log_path})")
    window = 1800 / scale
    return prom, (f"{rule} as shipped, evaluated by Prometheus ({prom.url}/alerts) with every duration divided "
                  f"by {scale:g} (30m -> {window:.3g}s); {ALERTS['llm']} also wants 100 judged conversations "
                  f"in that window")


MAX_TAIL_S = 30.0


def _taken(snapshot: Counts) -> float:
    """Conversations the hot path scored or counted unscored."""
    return snapshot.scored_distilled + sum(snapshot.unscored.values())


def _caught_up_for(history: RateHistory, conversations: int) -> float:
    """Seconds, by the latest scrapes, that the worker has had every conversation and no lag on any topic."""
    since: float | None = None
    for snapshot in reversed(history.snapshots):
        if snapshot.lag or _taken(snapshot) < conversations:
            break
        since = snapshot.t
    return 0.0 if since is None else history.snapshots[-1].t - since


def _finished(result: DemoResult, stats: SimulationStats, tail_s: float) -> bool:
    """After the simulator: stop once the worker has taken every conversation (the hot path scored or counted it
    unscored) and caught up on every topic for 3 s (the judge's verdicts are what the alert counts: a judge behind
    the simulator still has the spike to deliver) and the alert is not pending, or after MAX_TAIL_S."""
    pending = result.alert is not None and result.alert.state == "pending"
    return tail_s >= MAX_TAIL_S or (_caught_up_for(result.history, stats.conversations) >= 3.0 and not pending)


def _live_screen() -> Live:
    """The redrawn screen. Written to a file or a pipe, it ends without a newline (rich adds one only on a
    terminal): ``_summary`` starts a line of its own."""
    return Live(console=console, auto_refresh=False)


async def _watch(result: DemoResult, view: View, url: str, prom: LocalPrometheus | None,
                 sim: asyncio.Task[SimulationStats], procs: list[subprocess.Popen[bytes]], duration_s: float,
                 started: float) -> None:
    """Scrape, read the alert and redraw every second until the simulator's tail is scored."""
    alert: AlertState | None = None
    dead = 0.0
    failed, prom_failed = 0, (0 if prom is not None else None)
    with _live_screen() as live:
        while True:
            t = time.monotonic() - started
            for proc in procs:
                if proc.poll() is not None:
                    sim.cancel()
                    raise ConfigError(f"a demo process (pid {proc.pid}: {proc.args!s}) exited with code "
                                      f"{proc.returncode}; see the logs in {view.log_dir}")
            try:
                snapshot, dead = await asyncio.to_thread(scrape_counts, url, t)
                result.history.add(snapshot)
            except httpx.HTTPError:
                failed += 1  # shown: a worker too busy to answer its /metrics in 5 s hides the headline
            if prom is not None:
                with contextlib.suppress(httpx.HTTPError, KeyError, ValueError, ConfigError):
                    alert = alert_state(await asyncio.to_thread(prom.alerts), *ALERTS.values())
                    result.alert_timeline.append((t, alert))
                    if int(t) % 5 == 0:
                        prom_failed = await asyncio.to_thread(prom.failed_scrapes)
            result.alert = alert
            lag = result.history.latest.lag if result.history.latest else 0.0
            result.max_lag = max(result.max_lag, lag)
            result.health = Health(lag=lag, failed_scrapes=failed, prometheus_failed_scrapes=prom_failed)
            live.update(render(view, result.history, t, alert, dead, fired=result.fired(), health=result.health,
                               width=console.width), refresh=True)
            if sim.done() and _finished(result, sim.result(), t - duration_s):
                return
            await asyncio.sleep(max(0.1, 1.0 - (time.monotonic() - started - t)))  # a scrape can take a second


def _summary(result: DemoResult, rubric: RubricSet, view: View, workdir: Path) -> None:
    stats, h, spike = result.simulated, result.history, view.spike_at_s
    console.line()  # the live screen may end without one ("unit testssimulated ...")
    if stats is not None and spike is not None:
        console.print(f"simulated {stats.conversations} conversations ({stats.spiked_conversations} after the spike "
                      f"at t={spike:.0f}s), {stats.events} events")
    if spike is not None and h.latest is not None:
        dsat = [i.id for i in rubric.items if i.polarity == "dsat"]
        before = [r.value for i in dsat if (r := h.between(h.at(0.0), h.at(spike), i, "llm"))]
        recent = [r.value for i in dsat if (r := h.window(i, "llm", view.window_s))]
        if before and recent:
            console.print(f"judge DSAT share per item (mean of {len(dsat)} items): {sum(before) / len(before):.1%} "
                          f"before the spike, {sum(recent) / len(recent):.1%} in the last {view.window_s:.0f}s")
    fired = result.fired()
    if result.alert is None:
        console.print(f"alerts {ALERT_NAMES}: {view.alert_where}")
    for scorer, name in ALERTS.items():
        if result.alert is not None and scorer not in fired:
            console.print(f"alert {name} did not fire (last state: {result.alert.for_scorer(scorer).state})")
        for t, series in fired.get(scorer, []):
            items = ", ".join(x.rpartition(" (")[0] for x in series)
            early = (" (a control run without a spike: a false alarm of the rule)" if spike is None else
                     " (before the spike: a false alarm of the rule)" if t < spike else "")
            console.print(f"alert {name} fired at t={t:.0f}s on the {RATE_NAMES[scorer]} rates{early} ({items})")
    health = result.health
    if result.max_lag >= LAG_WARN:
        console.print(f"the worker fell behind (up to {result.max_lag:.0f} messages): the rates on screen trailed the "
                      "simulator; a busy machine, or lower --rate")
    if health.failed_scrapes or health.prometheus_failed_scrapes:
        console.print(f"failed scrapes of the worker's /metrics: demo {health.failed_scrapes}, Prometheus "
                      f"{health.prometheus_failed_scrapes or 0} (the worker was too busy to answer in time; Prometheus "
                      "evaluates the alert only on the scrapes it got)")
    models = sorted(p.name for p in (workdir / "models" / "distilled").glob("2*"))
    console.print(f"distilled models trained during the run: {len(models)}; logs in {workdir}")
    console.print(f"plot: {result.plot}")


@contextlib.contextmanager
def _exit_on_hangup() -> Iterator[None]:
    """SIGTERM or a closed terminal (SIGHUP) ends the demo like Ctrl-C: through the ``finally`` that stops
    its processes (Prometheus takes SIGHUP as "reload" and would outlive the demo)."""
    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_demo(settings: Settings, *, duration_s: float, rate: float, metrics_port: int, window_s: float = 20.0,
             alert_scale: float = 120.0, spike: bool = True) -> DemoResult:
    """``spike=False``: the control run, the same traffic without the spike (the alert should stay silent)."""
    workdir = settings.data_dir / "demo"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    judge_name = f"openai:{settings.judge_model}" if settings.judge_configured else "simulated"
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    plan = SimulationPlan(rate=rate, duration_s=duration_s, dsat_spike_at_s=duration_s / 2 if spike else None,
                          spike_factor=4.0)
    result = DemoResult(history=RateHistory())
    with _exit_on_hangup(), EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        sim_settings = settings.model_copy(update={"broker_url": broker.url})
        procs = start_processes(broker.url, workdir, metrics_port)
        prom: LocalPrometheus | None = None
        try:
            console.print(f"broker {broker.url} · worker metrics {url} · logs in {workdir}; starting the worker and "
                          f"training the first distilled model on {FIRST_MODEL_CONVERSATIONS} simulated "
                          "judge-labelled conversations ...")
            # while the worker starts: it loads the live model at start, or within CONVMON_REGISTRY_POLL_S
            publish_simulated_model(ModelRegistry(workdir / "models"), rubric, n=FIRST_MODEL_CONVERSATIONS,
                                    dsat_factor=1.0, min_positives=MIN_POSITIVES)
            wait_for_metrics(url, procs[0], log_path=workdir / "worker.log")
            prom, where = _start_prometheus(workdir, f"127.0.0.1:{metrics_port}", alert_scale)
            view = View(rubric=rubric, judge_name=judge_name, window_s=window_s, spike_at_s=plan.dsat_spike_at_s,
                        spike_factor=plan.spike_factor, min_positives=MIN_POSITIVES, alert_name=ALERT_NAMES,
                        alert_where=where, log_dir=workdir,
                        retrain_note=f"the worker loads the first within {REGISTRY_POLL_S}s of its training; the "
                                     f"retrainer trains new ones from the judge's labels every {RETRAIN_INTERVAL_S}s")
            started = time.monotonic()

            async def main() -> None:
                sim = asyncio.create_task(simulate(sim_settings.kafka, rubric, plan))
                await _watch(result, view, url, prom, sim, procs, duration_s, started)
                result.simulated = await sim

            asyncio.run(main())
        finally:
            if prom is not None:
                prom.stop()
            for proc in reversed(procs):
                stop_process(proc)
    result.plot = plot_rates(workdir / "rates.png", result.history, rubric, window_s=window_s, step_s=TREND_STEP_S,
                             spike_at_s=plan.dsat_spike_at_s, alert_name=ALERT_NAMES,
                             alert_timeline=result.alert_timeline, judge_name=judge_name)
    _summary(result, rubric, view, workdir)
    return result

