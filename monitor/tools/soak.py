"""`convmon soak --minutes N`: the whole monitor under a fixed load for a while, to see it stay healthy.

It starts an embedded broker, one worker process (simulated judge) and the retrainer process
(`convmon retrain`, so every agent runs and models hot-reload), with a first distilled model that scores every
item already live (production has yesterday's; a registry that starts empty would have the model grow, item by
item, as the retrainer's labels accumulate: 0.4 to 7.5 MB of weights, growth the memory verdict would read as a
leak), produces simulated conversations at
``rate`` per second, and every ``interval_s`` samples the worker's /metrics: conversations exported, consumer
lag, resident memory and the live heap. The summary says whether the worker kept up (lag back near zero at the
end) and whether memory stayed bounded: the slope of the live heap's 3-minute floor after warm-up, which lasts
as long as the longest state window (tombstones, dedup marks; see ``warmup_for``), stays under 1 MB/min
(``soak_report.py``; RSS judged beside it, for information). It writes ``soak.json`` (summary and every sample)
and ``soak-rss.png`` (RSS, heap and lag over time) to ``out_dir``. CI runs a 10-minute version (``make soak-ci``,
pytest marker ``soak``).
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
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from distill.registry import ModelRegistry
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import KafkaSettings, RubricSettings, Settings
from monitor.runtime.allocator import allocator_of, with_malloc
from monitor.runtime.broker import EmbeddedBroker, free_port, stop_process
from monitor.runtime.produce import make_producer, send_event
from monitor.runtime.scrape import by_label, scrape, total, wait_for_metrics
from monitor.tools.leak import BOOT
from monitor.tools.simulator.generate import ConversationGenerator
from monitor.tools.simulator.training import publish_simulated_model
from monitor.tools.soak_report import Sample, summarize, warmup_for, write_report

console = Console()
MB = 1024 * 1024


def retrain_cron(interval_s: float) -> str:
    """A cron schedule (croniter's 6th field is seconds) close to every ``interval_s`` seconds."""
    if interval_s < 60:
        return f"* * * * * */{max(1, int(interval_s))}"
    return f"*/{max(1, min(59, int(interval_s // 60)))} * * * *"


def _worker_env(broker_url: str, workdir: Path, port: int, retrain_interval_s: float,
                retention_s: float | None, *, malloc: str = "jemalloc") -> dict[str, str]:
    """The worker's and retrainer's environment, on the allocator ``malloc`` (``with_malloc``)."""
    env = with_malloc({k: v for k, v in os.environ.items() if not k.startswith(("CONVMON_", "OPENAI_"))}, malloc)
    env.update({
        "CONVMON_BROKER_URL": broker_url,
        "CONVMON_APP_ID": f"convmon-soak-{uuid.uuid4().hex[:6]}",
        "CONVMON_MODEL_REGISTRY": str(workdir / "models"),
        "CONVMON_LABEL_STORE_URL": f"sqlite:///{workdir / 'labels.db'}",
        "CONVMON_METRICS_PORT": str(port),
        "CONVMON_SAMPLE_RATE": "0.2",
        "CONVMON_RETRAIN_CRON": retrain_cron(retrain_interval_s),
        "CONVMON_RETRAIN_METRICS_PORT": str(free_port()),
        "CONVMON_RETRAIN_MIN_LABELS": "50",
        "CONVMON_REGISTRY_POLL_S": "5",
        "CONVMON_IDLE_TIMEOUT_S": "10",
    })
    if retention_s is not None:  # tombstones, dedup entries and reopenable turns expire this soon: steady sizes
        for name in ("CONVMON_CLOSED_RETENTION_S", "CONVMON_DEDUP_WINDOW_S", "CONVMON_REOPEN_WINDOW_S"):
            env[name] = str(retention_s)
    return env


def _sample(url: str, started: float, produced: int) -> Sample:
    s = scrape(url, timeout=5.0)
    exported = by_label(s, "convmon_conversations_scored_total", "scorer")
    return Sample(t=round(time.monotonic() - started, 1), produced=produced,
                  finished=total(s, "convmon_conversations_finished_total"), distilled=exported.get("distilled", 0.0),
                  llm=exported.get("llm", 0.0), lag=total(s, "convmon_consumer_lag_messages"),
                  rss_mb=total(s, "process_resident_memory_bytes") / MB, load1=round(os.getloadavg()[0], 2),
                  heap_mb=_maybe(s, "convmon_process_heap_allocated_bytes", MB),
                  py_blocks=_maybe(s, "convmon_process_python_allocated_blocks", 1),
                  anon_mb=_maybe(s, "convmon_process_anon_memory_bytes", MB))


def _maybe(samples: list[tuple[str, dict[str, str], float]], name: str, unit: float) -> float | None:
    """The metric's total in ``unit``, None when the worker does not export it (the heap under another malloc)."""
    return total(samples, name) / unit if any(n == name for n, _, _ in samples) else None


async def _load(kafka: KafkaSettings, rubrics: RubricSettings, rate: float, duration_s: float, url: str,
                interval_s: float, failures: list[str]) -> list[Sample]:
    """Start ``rate`` conversations a second (all events of each at once) and sample /metrics."""
    rubric = load_rubric_set(rubrics.rubric_set, rubrics.prompts_dir)
    generator = ConversationGenerator(rubric, seed=int(time.time()))
    producer = make_producer(kafka)
    await producer.start()
    samples: list[Sample] = []
    produced, started = 0, time.monotonic()
    next_sample = started
    try:
        while (now := time.monotonic()) - started < duration_s:
            while produced < (now - started) * rate:
                conv = generator.generate(f"soak-{uuid.uuid4().hex[:12]}", time.time())
                for event in conv.events:
                    await send_event(producer, kafka.input_topic_name, event)
                produced += 1
            if now >= next_sample:
                next_sample += interval_s
                try:
                    samples.append(await asyncio.to_thread(_sample, url, started, produced))
                except httpx.HTTPError as exc:  # a busy worker may miss one scrape; a dead one fails the run
                    failures.append(f"t={now - started:.0f}s {type(exc).__name__}")
                    console.print(f"scrape failed ({failures[-1]}), next sample in {interval_s:g}s")
                    continue
                last = samples[-1]
                console.print(f"t={last.t:5.0f}s produced={last.produced} finished={last.finished:.0f} "
                              f"lag={last.lag:.0f} rss={last.rss_mb:.0f}MB heap={last.heap_mb or 0:.1f}MB")
            await asyncio.sleep(0.02)
        await producer.flush()
        drain_until = time.monotonic() + 30  # let the tail finish: the end shows whether it keeps up
        while time.monotonic() < drain_until:
            try:
                samples.append(await asyncio.to_thread(_sample, url, started, produced))
            except httpx.HTTPError as exc:
                failures.append(f"t={time.monotonic() - started:.0f}s {type(exc).__name__} (drain)")
            else:
                if samples[-1].lag == 0 and samples[-1].finished >= produced:
                    break
            await asyncio.sleep(interval_s / 2)
    finally:
        await producer.stop()
    return samples


def soak(minutes: float, rate: float, *, interval_s: float = 10.0, out_dir: Path | None = None,
         retrain_interval_s: float = 60.0, retention_s: float | None = None,
         warmup_s: float | None = None, malloc: str = "jemalloc", inject_leak_mb_per_min: float = 0.0
         ) -> dict[str, Any]:
    """Run the soak; print a table of samples and the JSON summary, write the report, return the summary.

    ``retention_s`` shortens ``closed_retention_s``, ``dedup_window_s`` and ``reopen_window_s`` (1 hour, 2 days and
    1 day by default):
    state kept for a window grows until the window is full, so memory is judged only after that warm-up
    (``warmup_for``, or ``warmup_s``); a run shorter than its warm-up gives ``memory_bounded: null``.
    ``malloc`` is the worker's allocator: "jemalloc" (preloaded, as in the image) or "glibc".
    ``inject_leak_mb_per_min`` makes the worker leak that much (``tools/leak.py``): the verdict's positive control.
    """
    warmup = warmup_s if warmup_s is not None else warmup_for(retention_s)
    workdir = Path(tempfile.mkdtemp(prefix="convmon-soak-"))
    failures: list[str] = []  # scrapes that timed out (the sample is skipped)
    out_dir = out_dir or workdir
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        settings = Settings(broker_url=broker.url, topic_prefix="convmon.")
        # every item trained: the retrainer's candidates replace it only once they score every item too
        publish_simulated_model(ModelRegistry(workdir / "models"), load_rubric_set(settings.rubric_set,
                                                                                   settings.prompts_dir))
        log = (workdir / "worker.log").open("wb")
        env = _worker_env(broker.url, workdir, port, retrain_interval_s, retention_s, malloc=malloc)
        command = ["-m", "monitor.cli"] if not inject_leak_mb_per_min else [
            "-c", BOOT.format(mb_per_min=float(inject_leak_mb_per_min))]
        proc = subprocess.Popen([sys.executable, *command, "worker"], stdout=log, stderr=subprocess.STDOUT, env=env)
        retrain_log = (workdir / "retrain.log").open("wb")
        retrainer = subprocess.Popen([sys.executable, "-m", "monitor.cli", "retrain"], stdout=retrain_log,
                                     stderr=subprocess.STDOUT, env=env)
        try:
            wait_for_metrics(url, proc, log_path=workdir / "worker.log")
            allocator = allocator_of(proc.pid)
            samples = asyncio.run(_load(settings.kafka, settings.rubrics, rate, minutes * 60, url, interval_s,
                                        failures))
            alive = proc.poll() is None
        finally:
            stop_process(retrainer)
            stop_process(proc)
            retrain_log.close()
            log.close()
    title = f"convmon soak: {rate}/s for {minutes:g} min, {allocator} malloc" + (
        f", injected leak {inject_leak_mb_per_min:g} MB/min" if inject_leak_mb_per_min else "")
    summary = {**summarize(samples, rate=rate, warmup_s=warmup, load_s=minutes * 60), "worker_alive_at_end": alive,
               "malloc": allocator, "injected_leak_mb_per_min": inject_leak_mb_per_min,
               "load1_mean": round(sum(s.load1 for s in samples) / len(samples), 2),
               "load1_max": max(s.load1 for s in samples),
               "scrape_failures": failures, "logs": str(workdir),
               "report": str(out_dir / "soak.json"), "plot": str(out_dir / "soak-rss.png")}
    write_report(samples, summary, out_dir, title=title)
    table = Table(title=title)
    for column in ("t (s)", "produced", "finished", "distilled", "llm", "lag", "RSS (MB)", "heap (MB)"):
        table.add_column(column, justify="right")
    for s in samples:
        table.add_row(f"{s.t:.0f}", str(s.produced), f"{s.finished:.0f}", f"{s.distilled:.0f}", f"{s.llm:.0f}",
                      f"{s.lag:.0f}", f"{s.rss_mb:.1f}", "-" if s.heap_mb is None else f"{s.heap_mb:.1f}")
    console.print(table)
    print(json.dumps({"summary": summary, "samples": [asdict(s) for s in samples]}, indent=2))
    return summary
