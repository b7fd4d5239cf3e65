"""``bench latency``: event-to-score latency of worker processes at a fixed, paced input rate.

``bench throughput`` produces every conversation at once, so a conversation's wait there is mostly the backlog
ahead of it. Here the input arrives as a chat app sends it: ``rate`` conversations start per second for
``duration_s``, each conversation's turns (a real USS dialogue, ``turns.py``'s dialogues) spread evenly over
``spread_s`` seconds and followed by its ``end`` event. A conversation's latency is the time from its end
event's produce time (the driver's clock when it handed the event to the producer; also the event's
``timestamp`` and its Kafka timestamp) to its distilled score record's timestamp on ``<prefix>scores`` (the
worker's producer stamps it: CreateTime). Every conversation must be scored; the ids of any that were not are
reported. Worker CPU per conversation is read from /proc as ``bench throughput`` does, from the first measured
event produced to the last score read; the exported ``convmon_consumer_lag_messages`` (input topic) and
``convmon_score_delay_seconds`` are scraped alongside.

``worker_checkout`` runs the worker (``python -m monitor.cli worker``) from another checkout of this repository,
e.g. an older release, with the same driver (``worker_python``: its interpreter, e.g. a virtual environment with
the dependencies that release pins); which code it imported is checked and reported (``worker_code``).
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.throughput_input import publish_model, uss_dialogues
from bench.throughput_paths import WORKER, cpu_of, produce_timed, start_processes
from bench.turns import turn_event_messages
from bench.worker_source import known_setting, worker_code
from distill.datasets import SHARED_DATA, UssDialogue
from monitor.contracts.errors import ConfigError
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.runtime.broker import EmbeddedBroker, ensure_topics, free_port, stop_process
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import Sample, scrape

Progress = Callable[[str], None] | None
@dataclass(frozen=True)
class LatencyConfig:
    rate: float = 50.0  # conversations started per second
    duration_s: float = 60.0  # conversations start over this long: rate * duration_s of them
    spread_s: float = 5.0  # a conversation's turns spread over this long, then its end event
    workers: int = 1
    partitions: int = 4
    featurizer: str = "hashing"
    data_dir: Path = SHARED_DATA
    warmup: int = 100  # conversations produced at once and scored before the paced run (model load, group join)
    drain_timeout_s: float = 120.0  # after the last end event, wait this long at most for the last scores
    metrics_every_s: float = 2.0
    train_labels: int = 1000
    worker_checkout: Path | None = None  # None: this checkout
    worker_python: str | None = None  # the interpreter of the worker; None: this one
    seed: int = 0
    rubric: str = "spur-copilot"

    @property
    def n_conversations(self) -> int:
        return max(1, round(self.rate * self.duration_s))


@dataclass(frozen=True)
class Scheduled:
    at: float  # seconds after the paced run's start
    key: bytes
    event: dict[str, Any]  # without "timestamp": the driver stamps it when it sends
    end: bool


def paced_schedule(dialogues: Sequence[UssDialogue], n: int, *, rate: float, spread_s: float, seed: int,
                   prefix: str) -> list[Scheduled]:
    """Turn and end events of ``n`` conversations, conversation ``i`` starting at ``i / rate`` s, its ``k`` turns at
    ``start + spread_s * j / k`` and its end at ``start + spread_s``; sorted by time (dialogues reused past the
    files' count, as ``turns.py`` does)."""
    if rate <= 0 or spread_s < 0:
        raise ConfigError("the rate must be > 0 and the spread >= 0")
    order = list(range(len(dialogues)))
    random.Random(seed).shuffle(order)
    out: list[Scheduled] = []
    for i in range(n):
        dialogue, cid = dialogues[order[i % len(order)]], f"{prefix}-{i}"
        start, k = i / rate, len(dialogue.turns)
        for j, turn in enumerate(dialogue.turns):
            out.append(Scheduled(start + spread_s * j / k, cid.encode(), {
                "conversation_id": cid, "turn_index": j, "role": turn.role, "text": turn.text}, False))
        out.append(Scheduled(start + spread_s, cid.encode(), {"type": "end", "conversation_id": cid,
                                                               "turn_count": k}, True))
    out.sort(key=lambda s: s.at)  # stable: a conversation's events keep their order at equal times
    return out


def latency_summary(produced: Mapping[str, float], scored: Mapping[str, float]) -> dict[str, Any]:
    """Per-conversation latency (score time - end event's produce time, seconds) of every produced id: p50, p95,
    p99, max and mean, how many were scored, and the ids never scored. Scores of ids not produced are ignored."""
    latencies = sorted(scored[cid] - at for cid, at in produced.items() if cid in scored)
    missing = sorted(set(produced) - set(scored))
    out: dict[str, Any] = {"conversations": len(produced), "scored": len(latencies), "missing": len(missing),
                           "missing_ids": missing}
    if latencies:
        out |= {f"p{q}_s": float(np.percentile(latencies, q)) for q in (50, 95, 99)}
        out |= {"max_s": latencies[-1], "min_s": latencies[0], "mean_s": sum(latencies) / len(latencies)}
    return out


def histogram_quantile_le(before: list[Sample], after: list[Sample], name: str, q: float,
                          **match: str) -> float | None:
    """The upper bound of the bucket holding the ``q`` quantile (0-1) of a histogram's observations between two
    scrapes (summed over workers): what a Prometheus query of the exported histogram can say at best."""
    def buckets(samples: list[Sample]) -> dict[float, float]:
        out: dict[float, float] = {}
        for n, labels, v in samples:
            if n == f"{name}_bucket" and all(labels.get(k) == x for k, x in match.items()):
                le = float(labels["le"])
                out[le] = out.get(le, 0.0) + v
        return out

    b0, b1 = buckets(before), buckets(after)
    delta = sorted((le, v - b0.get(le, 0.0)) for le, v in b1.items())
    if not delta or delta[-1][1] <= 0:
        return None
    total = delta[-1][1]
    return next(le for le, count in delta if count >= q * total)


class _Run:
    """What the paced run's tasks share."""

    def __init__(self, wanted: set[str]) -> None:
        self.wanted = wanted
        self.ended: dict[str, float] = {}  # id -> end event's produce time (wall clock)
        self.scored: dict[str, float] = {}  # id -> score record's timestamp (wall clock)
        self.timestamp_types: set[int] = set()
        self.max_slip_s = 0.0  # how late the driver sent an event against its schedule
        self.lag: list[float] = []  # exported input lag, summed over workers, per scrape
        self.scrape_errors = 0
        self.produced_all = asyncio.Event()
        self.done = asyncio.Event()


async def _read_scores(consumer: AIOKafkaConsumer, run: _Run) -> None:
    while not run.done.is_set():
        for records in (await consumer.getmany(timeout_ms=200, max_records=10_000)).values():
            for record in records:
                score = orjson.loads(record.value)
                cid = score.get("conversation_id")
                if score.get("scorer") == "distilled" and cid in run.wanted and cid not in run.scored:
                    run.scored[cid] = record.timestamp / 1000
                    run.timestamp_types.add(record.timestamp_type)
        if run.produced_all.is_set() and len(run.scored) == len(run.wanted):
            run.done.set()


async def _produce_paced(producer: AIOKafkaProducer, topic: str, schedule: Sequence[Scheduled], run: _Run) -> None:
    started = time.perf_counter()
    i = 0
    while i < len(schedule):
        now = time.perf_counter() - started
        if schedule[i].at > now:
            await asyncio.sleep(schedule[i].at - now)
            continue
        while i < len(schedule) and schedule[i].at <= now:
            item = schedule[i]
            sent = time.time()
            await producer.send(topic, key=item.key, value=orjson.dumps({**item.event, "timestamp": sent}),
                                timestamp_ms=int(sent * 1000))
            if item.end:
                run.ended[item.event["conversation_id"]] = int(sent * 1000) / 1000  # as the record carries it
            run.max_slip_s = max(run.max_slip_s, now - item.at)
            i += 1
    await producer.flush()
    run.produced_all.set()


async def _watch(urls: Sequence[str], topic: str, run: _Run, every_s: float, n: int, progress: Progress) -> None:
    started = last_line = time.monotonic()
    while not run.done.is_set():
        try:
            samples = [s for url in urls for s in await asyncio.to_thread(scrape, url)]
            lag = [v for name, labels, v in samples
                   if name == "convmon_consumer_lag_messages" and labels.get("topic") == topic]
            if lag:  # the worker sets it every 5 s, from its first assignment on
                run.lag.append(sum(lag))
        except Exception:  # noqa: BLE001 - a missed scrape is counted, not fatal
            run.scrape_errors += 1
        if progress and time.monotonic() - last_line >= 5:
            last_line = time.monotonic()
            progress(f"latency: {last_line - started:.0f} s, {len(run.ended)}/{n} conversations ended, "
                     f"{len(run.scored)} scored, input lag {run.lag[-1] if run.lag else '?'}")
        try:
            await asyncio.wait_for(run.done.wait(), every_s)
        except TimeoutError:
            pass


async def _drive(config: LatencyConfig, settings: Settings, bootstrap: str, warmup: list[tuple[bytes, bytes]],
                 schedule: Sequence[Scheduled], pids: Sequence[int], urls: Sequence[str], broker_pid: int | None,
                 progress: Progress) -> dict[str, Any]:
    kafka = settings.kafka
    consumer = AIOKafkaConsumer(kafka.topic("scores"), bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1)
    await consumer.start()
    await producer.start()
    try:
        warm = _Run({k.decode() for k, _ in warmup})
        warm.produced_all.set()
        reader = asyncio.create_task(_read_scores(consumer, warm))
        await produce_timed(bootstrap, kafka.topic("events"), warmup)
        try:
            await asyncio.wait_for(reader, 300)
        except TimeoutError as exc:
            raise ConfigError(f"the warm-up's {len(warm.wanted) - len(warm.scored)} conversations were not scored "
                              "in 300 s; see the worker log") from exc
        if progress:
            progress(f"latency: warm-up scored; paced run: {config.n_conversations} conversations at "
                     f"{config.rate:g}/s, turns over {config.spread_s:g} s")
        before = [s for url in urls for s in scrape(url)]
        run = _Run({s.event["conversation_id"] for s in schedule if s.end})
        load0 = os.getloadavg()
        broker0 = cpu_of([broker_pid]) if broker_pid else None
        cpu0, driver0, started = cpu_of(pids), time.process_time(), time.perf_counter()
        tasks = [asyncio.create_task(_read_scores(consumer, run)),
                 asyncio.create_task(_watch(urls, kafka.topic("events"), run, config.metrics_every_s,
                                            len(run.wanted), progress))]
        await _produce_paced(producer, kafka.topic("events"), schedule, run)
        produced_s = time.perf_counter() - started
        try:
            await asyncio.wait_for(run.done.wait(), config.drain_timeout_s)
        except TimeoutError:
            run.done.set()
        elapsed = time.perf_counter() - started
        cpu1, driver1 = cpu_of(pids), time.process_time()
        broker1 = cpu_of([broker_pid]) if broker_pid else None
        await asyncio.gather(*tasks)
        after = [s for url in urls for s in scrape(url)]
    finally:
        await producer.stop()
        await consumer.stop()
    summary = latency_summary(run.ended, run.scored)
    scored = max(summary["scored"], 1)
    out: dict[str, Any] = {
        "latency": summary, "produce_s": produced_s, "elapsed_s": elapsed,
        "max_send_slip_s": run.max_slip_s, "load_average_1m": [load0[0], os.getloadavg()[0]],
        "score_timestamp_types": sorted(run.timestamp_types),  # 0: CreateTime (the worker's producer), 1: LogAppend
        "exported": {"input_lag_max": max(run.lag) if run.lag else None,
                     "input_lag_p99": float(np.percentile(run.lag, 99)) if run.lag else None,
                     "input_lag_last": run.lag[-1] if run.lag else None, "lag_scrapes": len(run.lag),
                     "scrape_errors": run.scrape_errors,
                     "score_delay_p99_bucket_le": histogram_quantile_le(
                         before, after, "convmon_score_delay_seconds", 0.99, scorer="distilled")},
        "driver_cpu_cores": (driver1 - driver0) / elapsed}
    if cpu0 is not None and cpu1 is not None:
        out |= {"worker_cpu_s": cpu1 - cpu0, "worker_cpu_cores": (cpu1 - cpu0) / elapsed,
                "worker_cpu_us_per_conversation": 1e6 * (cpu1 - cpu0) / scored}
    if broker0 is not None and broker1 is not None:
        out["broker_cpu_cores"] = (broker1 - broker0) / elapsed
    return out


def run_latency(config: LatencyConfig, progress: Progress = None) -> dict[str, Any]:
    """One paced run against fresh worker processes on an embedded broker; see the module docstring."""
    checkout = Path(config.worker_checkout or REPO_ROOT).resolve()
    dialogues = uss_dialogues(Path(config.data_dir))
    rubric = load_rubric_set(config.rubric, REPO_ROOT / "prompts")
    warmup = turn_event_messages(dialogues, config.warmup, seed=config.seed + 7, prefix="warm")
    schedule = paced_schedule(dialogues, config.n_conversations, rate=config.rate, spread_s=config.spread_s,
                              seed=config.seed + 11, prefix="lat")
    unique = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="convmon-bench-latency-") as tmp, EmbeddedBroker() as broker:
        settings = Settings(broker_url=broker.url, topic_partitions=config.partitions, sample_rate=0.0,
                            featurizer=config.featurizer, data_dir=Path(tmp), model_registry=Path(tmp) / "models",
                            registry_poll_s=1.0, retrain_cron=None, app_id=f"lat-{unique}",
                            topic_prefix=f"l{unique}.", label_store_url=f"sqlite:///{tmp}/labels.db",
                            metrics_port=free_port())
        publish_model(settings.distill, rubric, config.featurizer, config.train_labels, config.seed)
        asyncio.run(ensure_topics(broker.bootstrap, topic_names(settings), config.partitions))
        log_path = Path(tmp) / "worker.log"
        if progress:
            progress(f"latency: starting {config.workers} worker(s) in {checkout}")
        python = config.worker_python or sys.executable
        procs, urls, env = start_processes(settings, WORKER, config.workers, log_path, cwd=checkout,
                                           settings_filter=known_setting, python=python)
        try:
            code = worker_code(checkout, env, procs[0].pid, python)
            measured = asyncio.run(_drive(config, settings, broker.bootstrap, warmup, schedule,
                                          [p.pid for p in procs], urls, broker.pid, progress))
        finally:
            for proc in procs:
                stop_process(proc)
    turns = sum(1 for s in schedule if not s.end)
    return {"rate_per_s": config.rate, "duration_s": config.duration_s, "spread_s": config.spread_s,
            "conversations": config.n_conversations, "turns_per_conversation": turns / config.n_conversations,
            "worker_processes": config.workers, "partitions": config.partitions, "featurizer": config.featurizer,
            "warmup_conversations": config.warmup, "worker_code": code, **measured}


def latency_rows(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(measure, value) rows of one run, for the rich table."""
    lat = result["latency"]

    def ms(key: str) -> str:
        return f"{1000 * lat[key]:.0f} ms" if key in lat else "-"

    exported = result["exported"]
    rows = [("worker code", f"{result['worker_code']['commit']} ({result['worker_code']['checkout']})"),
            ("offered", f"{result['rate_per_s']:g} conversations / s for {result['duration_s']:g} s, turns over "
                        f"{result['spread_s']:g} s ({result['turns_per_conversation']:.1f} a conversation)"),
            ("scored", f"{lat['scored']} / {lat['conversations']}"
                       + (f" (missing: {', '.join(lat['missing_ids'][:10])})" if lat["missing"] else "")),
            *((f"end → score {q}", ms(f"{q}_s")) for q in ("p50", "p95", "p99", "max")),
            ("worker CPU µs / conversation", f"{result.get('worker_cpu_us_per_conversation', float('nan')):.0f}"),
            ("worker CPU (cores)", f"{result.get('worker_cpu_cores', float('nan')):.2f}"),
            ("exported input lag, max (messages)", str(exported["input_lag_max"])),
            ("exported score delay p99 bucket (s, le)", str(exported["score_delay_p99_bucket_le"])),
            ("driver's largest send slip", f"{1000 * result['max_send_slip_s']:.0f} ms"),
            ("load average (1 min) start, end", ", ".join(f"{v:.1f}" for v in result["load_average_1m"]))]
    return rows
