"""``bench throughput --rounds N``: the CPU time each path spends per conversation, in alternated rounds.

Rates move 2x on a loaded machine; the CPU a path spends per conversation moves far less, so it is the
number the speed bars compare. Both inputs (turn events, whole conversations) run in one call; for each
input and round the two paths run back to back in turn: raw consume (the bare consumer: this process's
CPU while it reads and decodes) and the monitor (the worker processes' CPU from the first measured message
produced to the last score read). Each run gets fresh topics. The median and range
over the rounds are reported, and raw consume's CPU per conversation / the monitor's, round by round
(1.0 would be a monitor that costs what reading its input costs).

With a ``baseline`` (another checkout, e.g. an older release, and its interpreter) a third path runs in every
round right after this checkout's monitor, on the same input: the baseline's worker (``worker_source.py``),
with the ratio baseline CPU / this monitor's round by round (above 1.0: this checkout spends less).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.throughput import ThroughputConfig, bench_messages
from bench.throughput_input import publish_model
from bench.throughput_paths import monitor_rate, raw_consume_rate
from bench.worker_source import WorkerSource
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.runtime.broker import EmbeddedBroker, ensure_topics, free_port
from monitor.runtime.clients import topic_names

MODES = ("turns", "conversations")
PATHS = ("raw_consume", "monitor")
Messages = list[tuple[bytes, bytes]]


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median and range of one variant's rounds, with the rounds themselves."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "rounds": list(values)}


def run_cpu_rounds(config: ThroughputConfig, rounds: int, progress: Callable[[str], None] | None = None,
                   baseline: WorkerSource | None = None) -> dict[str, Any]:
    """CPU µs per conversation and rate of every path on both inputs, ``rounds`` alternated rounds each."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    rubric = load_rubric_set(config.rubric, REPO_ROOT / "prompts")
    spec = config.featurizers[0]
    processes = config.workers or os.cpu_count() or 1
    paths = (*PATHS, "baseline") if baseline else PATHS
    sources = {"monitor": WorkerSource(), "baseline": baseline} if baseline else {}
    cpu: dict[str, dict[str, list[float]]] = {m: {p: [] for p in paths} for m in MODES}
    rate: dict[str, dict[str, list[float]]] = {m: {p: [] for p in paths} for m in MODES}
    code: dict[str, dict[str, Any]] = {}
    counted: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="convmon-bench-cpu-") as tmp, EmbeddedBroker() as broker:
        base = Settings(broker_url=broker.url, topic_partitions=config.partitions, sample_rate=0.0,
                        featurizer=spec, data_dir=Path(tmp), model_registry=Path(tmp) / "models",
                        registry_poll_s=1.0, retrain_cron=None)
        publish_model(base.distill, rubric, spec, config.train_labels, config.seed)
        for mode in MODES:
            one = replace(config, mode=mode)  # type: ignore[arg-type]
            warmup = bench_messages(one, rubric, one.warmup, seed=config.seed + 7, prefix="warm")
            measured = bench_messages(one, rubric, one.n_conversations, seed=config.seed + 11, prefix="conv")
            n = counted[mode] = len({key for key, _ in measured})
            for r in range(rounds):
                for path in paths:
                    if progress:
                        progress(f"CPU round {r + 1}/{rounds}, {mode}: {path}")
                    seconds, per_s, imported = _measure(path, base, broker, Path(tmp), warmup, measured, n,
                                                        processes, config.timeout_s, sources.get(path))
                    cpu[mode][path].append(1e6 * seconds / n)
                    rate[mode][path].append(per_s)
                    code.setdefault(path, imported or {})
    info: dict[str, Any] = {
        "rounds": rounds, "featurizer": spec, "worker_processes": processes, "conversations": counted,
        "order": "per round: " + ", ".join(paths),
        "per_s": {m: {p: spread(v) for p, v in by_path.items()} for m, by_path in rate.items()},
        "raw_to_monitor_cpu": {m: round_ratios(cpu[m]["raw_consume"], cpu[m]["monitor"]) for m in MODES}}
    if baseline:
        info |= {"worker_code": {p: code[p] for p in ("monitor", "baseline")},
                 "baseline_to_monitor_cpu": {m: round_ratios(cpu[m]["baseline"], cpu[m]["monitor"]) for m in MODES}}
    return {"cpu_us_per_conversation": {m: {p: spread(v) for p, v in by_path.items()} for m, by_path in cpu.items()},
            "cpu_rounds": info}


def round_ratios(numerators: Sequence[float], denominators: Sequence[float]) -> dict[str, Any]:
    """The spread of one path's CPU / another's, round by round."""
    return spread([a / b for a, b in zip(numerators, denominators, strict=True)])


def _measure(path: str, base: Settings, broker: EmbeddedBroker, tmp: Path, warmup: Messages, measured: Messages,
             n: int, processes: int, timeout_s: float, source: WorkerSource | None
             ) -> tuple[float, float, dict[str, Any] | None]:
    """(CPU seconds, conversations / s, the workers' code) of one path over the measured messages, on fresh
    topics; ``source``: where a monitor path's workers run from."""
    unique = uuid.uuid4().hex[:8]
    if path == "raw_consume":
        topic = f"bench-{unique}.raw"
        asyncio.run(ensure_topics(broker.bootstrap, [topic], base.topic_partitions))
        timing: dict[str, float] = {}
        messages_per_s = asyncio.run(raw_consume_rate(broker.bootstrap, topic, measured, timing=timing))
        return timing["cpu_s"], messages_per_s * n / len(measured), None
    settings = base.model_copy(update={"app_id": f"bench-{unique}", "topic_prefix": f"b{unique}.",
                                       "label_store_url": f"sqlite:///{tmp}/{unique}.db",
                                       "metrics_port": free_port()})
    asyncio.run(ensure_topics(broker.bootstrap, topic_names(settings), base.topic_partitions))
    run = monitor_rate(settings, broker.bootstrap, warmup, measured, tmp / f"{unique}.log", timeout_s,
                       processes=processes, broker_pid=broker.pid, source=source)
    if run.get("worker_cpu_s") is None:
        raise RuntimeError("the workers' CPU time cannot be read here (/proc is absent)")
    return float(run["worker_cpu_s"]), float(run["per_s"]), run.get("worker_code")


def cpu_markdown(result: dict[str, Any]) -> str:
    """The rounds as a table: CPU µs per conversation (median, range) and rate, per input and path."""
    info = result["cpu_rounds"]
    lines = [f"CPU per conversation ({info['rounds']} alternated rounds per variant, {info['order']}; "
             f"{info['worker_processes']} worker process(es), distilled `{info['featurizer']}`, conversations "
             + ", ".join(f"{m} {n}" for m, n in info["conversations"].items())
             + "; median [min-max]; raw consume is this benchmark's own process, the others the workers):", "",
             "| input | path | CPU µs / conversation | conversations / s |", "|---|---|---|---|"]
    for mode, paths in result["cpu_us_per_conversation"].items():
        for path, cpu in paths.items():
            per_s = info["per_s"][mode][path]
            lines.append(f"| {mode} | {path} | {cpu['median']:.0f} [{cpu['min']:.0f}-{cpu['max']:.0f}] | "
                         f"{per_s['median']:.1f} [{per_s['min']:.1f}-{per_s['max']:.1f}] |")
    ratios = [f"{m} {100 * r['median']:.2f} % [{100 * r['min']:.2f}-{100 * r['max']:.2f}]"
              for m, r in info["raw_to_monitor_cpu"].items()]
    lines += ["", "Raw consume's CPU per conversation / the monitor's: " + "; ".join(ratios) + "."]
    if "baseline_to_monitor_cpu" in info:
        code = info["worker_code"]
        lines.append(f"The baseline ({code['baseline']['commit']}, {code['baseline']['checkout']})'s CPU per "
                     f"conversation / this checkout's monitor's ({code['monitor']['commit']}): "
                     + "; ".join(f"{m} {r['median']:.2f}x [{r['min']:.2f}-{r['max']:.2f}]"
                                 for m, r in info["baseline_to_monitor_cpu"].items()) + ".")
    return "\n".join(lines)
