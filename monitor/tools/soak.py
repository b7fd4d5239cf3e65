"""`convmon soak --minutes N`: the whole monitor under a fixed load for a while, to see it stay healthy.

It starts an embedded broker, one worker process (simulated judge) and the retrainer process
(`convmon retrain` every minute, so every agent runs and models hot-reload), produces simulated
conversations at ``rate`` per second, and every ``interval_s`` samples the worker's /metrics:
conversations exported, consumer lag and resident memory. The summary says whether the worker kept
up (lag back near zero at the end) and whether memory stayed bounded (RSS growth over the second
half of the run). Not part of CI.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.runtime.broker import EmbeddedBroker, free_port, stop_process
from monitor.runtime.produce import make_producer, send_event
from monitor.runtime.scrape import by_label, scrape, total, wait_for_metrics
from monitor.tools.simulator.generate import ConversationGenerator

console = Console()
MB = 1024 * 1024


@dataclass(frozen=True)
class Sample:
    t: float  # seconds since the load started
    produced: int  # conversations sent by the load generator
    finished: float  # conversations the sessionizer finished
    distilled: float  # distilled score records exported
    llm: float  # judge score records exported
    lag: float  # messages behind the log end, summed over the worker's input topics
    rss_mb: float


def summarize(samples: list[Sample], *, rate: float) -> dict[str, Any]:
    """Throughput, lag and memory figures of a run; ``memory_bounded`` compares the two halves' RSS."""
    if len(samples) < 2:
        raise ValueError("a soak summary needs at least two samples")
    first, last = samples[0], samples[-1]
    span = max(last.t - first.t, 1e-9)
    second_half = [s for s in samples if s.t >= last.t / 2] or samples[-2:]
    h0, h1 = second_half[0], second_half[-1]
    growth = (h1.rss_mb - h0.rss_mb) / max((h1.t - h0.t) / 60, 1e-9)
    peak_first_half = max(s.rss_mb for s in samples if s.t < last.t / 2) if last.t > 0 else first.rss_mb
    return {
        "duration_s": round(last.t, 1),
        "target_rate_per_s": rate,
        "produced": last.produced,
        "finished": last.finished,
        "exported_distilled": last.distilled,
        "exported_llm": last.llm,
        "throughput_conversations_per_s": round((last.finished - first.finished) / span, 2),
        "lag_max": max(s.lag for s in samples),
        "lag_end": last.lag,
        "rss_mb_start": round(first.rss_mb, 1),
        "rss_mb_end": round(last.rss_mb, 1),
        "rss_mb_max": round(max(s.rss_mb for s in samples), 1),
        "rss_growth_mb_per_min_second_half": round(growth, 2),
        # Bounded: the second half grows less than 1 MB/min and never exceeds the first half's peak by 25%.
        "memory_bounded": growth < 1.0 and max(s.rss_mb for s in second_half) <= 1.25 * peak_first_half,
        "kept_up": last.finished >= 0.95 * last.produced - rate * 15,
    }


def _worker_env(broker_url: str, workdir: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVMON_", "OPENAI_"))}
    env.update({
        "CONVMON_BROKER_URL": broker_url,
        "CONVMON_APP_ID": f"convmon-soak-{uuid.uuid4().hex[:6]}",
        "CONVMON_MODEL_REGISTRY": str(workdir / "models"),
        "CONVMON_LABEL_STORE_URL": f"sqlite:///{workdir / 'labels.db'}",
        "CONVMON_METRICS_PORT": str(port),
        "CONVMON_SAMPLE_RATE": "0.2",
        "CONVMON_RETRAIN_CRON": "* * * * *",  # `convmon retrain`, every minute
        "CONVMON_RETRAIN_METRICS_PORT": str(free_port()),
        "CONVMON_RETRAIN_MIN_LABELS": "50",
        "CONVMON_REGISTRY_POLL_S": "5",
        "CONVMON_IDLE_TIMEOUT_S": "10",
    })
    return env


def _sample(url: str, started: float, produced: int) -> Sample:
    s = scrape(url, timeout=5.0)
    exported = by_label(s, "convmon_conversations_scored_total", "scorer")
    return Sample(t=round(time.monotonic() - started, 1), produced=produced,
                  finished=total(s, "convmon_conversations_finished_total"), distilled=exported.get("distilled", 0.0),
                  llm=exported.get("llm", 0.0), lag=total(s, "convmon_consumer_lag_messages"),
                  rss_mb=total(s, "process_resident_memory_bytes") / MB)


async def _load(settings: Settings, rate: float, duration_s: float, url: str, interval_s: float) -> list[Sample]:
    """Start ``rate`` conversations a second (all events of each at once) and sample /metrics."""
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    generator = ConversationGenerator(rubric, seed=int(time.time()))
    producer = make_producer(settings)
    await producer.start()
    samples: list[Sample] = []
    produced, started = 0, time.monotonic()
    next_sample = started
    try:
        while (now := time.monotonic()) - started < duration_s:
            while produced < (now - started) * rate:
                conv = generator.generate(f"soak-{uuid.uuid4().hex[:12]}", time.time())
                for event in conv.events:
                    await send_event(producer, settings.topic("events"), event)
                produced += 1
            if now >= next_sample:
                samples.append(await asyncio.to_thread(_sample, url, started, produced))
                last = samples[-1]
                console.print(f"t={last.t:5.0f}s produced={last.produced} finished={last.finished:.0f} "
                              f"lag={last.lag:.0f} rss={last.rss_mb:.0f}MB")
                next_sample += interval_s
            await asyncio.sleep(0.02)
        await producer.flush()
        drain_until = time.monotonic() + 30  # let the tail finish: the end shows whether it keeps up
        while time.monotonic() < drain_until:
            samples.append(await asyncio.to_thread(_sample, url, started, produced))
            if samples[-1].lag == 0 and samples[-1].finished >= produced:
                break
            await asyncio.sleep(interval_s / 2)
    finally:
        await producer.stop()
    return samples


def soak(minutes: float, rate: float, *, interval_s: float = 10.0) -> dict[str, Any]:
    """Run the soak; print a table of samples and the JSON summary, and return the summary."""
    workdir = Path(tempfile.mkdtemp(prefix="convmon-soak-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        settings = Settings(broker_url=broker.url, topic_prefix="convmon.")
        log = (workdir / "worker.log").open("wb")
        env = _worker_env(broker.url, workdir, port)
        proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "worker"], stdout=log, stderr=subprocess.STDOUT,
                                env=env)
        retrain_log = (workdir / "retrain.log").open("wb")
        retrainer = subprocess.Popen([sys.executable, "-m", "monitor.cli", "retrain"], stdout=retrain_log,
                                     stderr=subprocess.STDOUT, env=env)
        try:
            wait_for_metrics(url, proc, log_path=workdir / "worker.log")
            samples = asyncio.run(_load(settings, rate, minutes * 60, url, interval_s))
            alive = proc.poll() is None
        finally:
            stop_process(retrainer)
            stop_process(proc)
            retrain_log.close()
            log.close()
    summary = {**summarize(samples, rate=rate), "worker_alive_at_end": alive, "logs": str(workdir)}
    table = Table(title=f"convmon soak: {rate}/s for {minutes} min")
    for column in ("t (s)", "produced", "finished", "distilled", "llm", "lag", "RSS (MB)"):
        table.add_column(column, justify="right")
    for s in samples:
        table.add_row(f"{s.t:.0f}", str(s.produced), f"{s.finished:.0f}", f"{s.distilled:.0f}", f"{s.llm:.0f}",
                      f"{s.lag:.0f}", f"{s.rss_mb:.1f}")
    console.print(table)
    print(json.dumps({"summary": summary, "samples": [asdict(s) for s in samples]}, indent=2))
    return summary
