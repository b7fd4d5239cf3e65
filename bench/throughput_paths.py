"""The paths ``bench throughput`` measures: a bare consumer (the limit), worker processes in one consumer group
(the monitor), the distilled scoring step in-process, and the judge client.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.worker_source import WorkerSource, worker_code
from distill.registry import ModelRegistry
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.settings import REPO_ROOT, DistillSettings, KafkaSettings, Settings, StreamSettings
from monitor.runtime.broker import free_port, stop_process
from monitor.runtime.scrape import scrape, total, wait_for_metrics
from monitor.stages.classify import DistilledScorer


def settings_env(settings: Settings) -> dict[str, str]:
    """Every settings field as a CONVMON_* variable, for a worker subprocess."""
    env = {}
    for name, value in settings.model_dump(mode="json").items():
        if value is not None and name not in ("openai_api_key", "kafka_sasl_password"):
            env[f"CONVMON_{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM (peak resident set) of a live process, in MB; None where /proc is absent."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process (all threads), from /proc; None where absent."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def produce_timed(bootstrap: str, topic: str, messages: Sequence[tuple[bytes | None, bytes]]) -> float:
    """Produce (key, value) pairs (key None: unkeyed, as the Collector's exporter publishes); seconds taken."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=1 << 20,
                                max_request_size=16 << 20, acks=1)
    await producer.start()
    started = time.perf_counter()
    try:
        for key, value in messages:
            await producer.send(topic, key=key, value=value)
        await producer.flush()
    finally:
        await producer.stop()
    return time.perf_counter() - started


async def raw_consume_rate(bootstrap: str, topic: str, messages: Sequence[tuple[bytes | None, bytes]],
                           decode: Callable[[bytes], object] = orjson.loads,
                           timing: dict[str, float] | None = None) -> float:
    """Messages per second for a bare consumer decoding each pre-produced message (orjson by default).
    ``timing["cpu_s"]`` gets the CPU time this process spent consuming (the producing before excluded)."""
    await produce_timed(bootstrap, topic, messages)
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                                enable_auto_commit=False, max_partition_fetch_bytes=16 << 20)
    await consumer.start()
    seen = 0
    try:
        started, cpu0 = time.perf_counter(), time.process_time()
        while seen < len(messages):
            for records in (await consumer.getmany(timeout_ms=1000, max_records=10_000)).values():
                for record in records:
                    decode(record.value or b"")
                    seen += 1
        elapsed = time.perf_counter() - started
        if timing is not None:
            timing["cpu_s"] = time.process_time() - cpu0
    finally:
        await consumer.stop()
    return len(messages) / elapsed


async def _scored(consumer: AIOKafkaConsumer, wanted: set[str], deadline: float,
                  sizes: list[int] | None = None) -> float:
    """Wait until every id in ``wanted`` has a distilled score; the monotonic time the last one arrived.
    ``sizes`` collects the byte size of each of those score records."""
    last = time.perf_counter()
    while wanted:
        if time.monotonic() > deadline:
            raise ConfigError(f"timed out with {len(wanted)} conversations unscored; see the worker log")
        for records in (await consumer.getmany(timeout_ms=500, max_records=10_000)).values():
            for record in records:
                score = orjson.loads(record.value)
                if score.get("scorer") == "distilled" and score["conversation_id"] in wanted:
                    wanted.discard(score["conversation_id"])
                    last = time.perf_counter()
                    if sizes is not None:
                        sizes.append(len(record.value))
    return last


def batch_totals(metrics_urls: Sequence[str]) -> tuple[float, float, float]:
    """(batches, conversations, seconds) the workers' distilled path has scored so far."""
    samples = [s for url in metrics_urls for s in scrape(url)]
    return (total(samples, "convmon_classify_batch_conversations_count"),
            total(samples, "convmon_classify_batch_conversations_sum"),
            total(samples, "convmon_classify_batch_duration_seconds_sum"))


def cpu_of(pids: Sequence[int]) -> float | None:
    """CPU seconds the processes used so far, together (None if one cannot be read)."""
    seconds = [cpu_seconds(pid) for pid in pids]
    return None if any(s is None for s in seconds) else sum(s for s in seconds if s is not None)


async def _drive_worker(kafka: KafkaSettings, bootstrap: str, warmup: list[tuple[bytes, bytes]],
                        measured: list[tuple[bytes, bytes]], timeout_s: float, pids: Sequence[int],
                        metrics_urls: Sequence[str], timing: dict[str, float],
                        broker_pid: int | None = None) -> tuple[float, float]:
    consumer = AIOKafkaConsumer(kafka.topic("scores"), bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        await produce_timed(bootstrap, kafka.topic("events"), warmup)  # model load, group join, first batches
        await _scored(consumer, {k.decode() for k, _ in warmup}, deadline)
        batches0 = batch_totals(metrics_urls)
        cpu0, started = cpu_of(pids), time.perf_counter()
        broker0, driver0 = cpu_of([broker_pid]) if broker_pid else None, time.process_time()
        produce_s = await produce_timed(bootstrap, kafka.topic("events"), measured)
        wanted = {k.decode() for k, _ in measured}
        sizes: list[int] = []
        finished = await _scored(consumer, set(wanted), deadline, sizes)
        cpu1 = cpu_of(pids)
        elapsed = time.perf_counter() - started
        if cpu0 is not None and cpu1 is not None:  # >= 1.0 means the workers used a whole core or more
            timing["worker_cpu_cores"] = (cpu1 - cpu0) / elapsed
            timing["worker_cpu_s"] = cpu1 - cpu0
        # what else ran on the same cores: the broker, and this process (it produces the input, reads the scores)
        broker1 = cpu_of([broker_pid]) if broker_pid else None
        if broker0 is not None and broker1 is not None:
            timing["broker_cpu_cores"] = (broker1 - broker0) / elapsed
        timing["driver_cpu_cores"] = (time.process_time() - driver0) / elapsed
        if sizes:
            timing["score_record_bytes"] = sum(sizes) / len(sizes)
        timing["conversations"] = len(wanted)
        batches, conversations, seconds = (b - a for a, b in zip(batches0, batch_totals(metrics_urls), strict=True))
        if batches:  # what the worker's batches looked like: full under load, and what one cost
            timing["batch_mean"], timing["batch_seconds_mean"] = conversations / batches, seconds / batches
    finally:
        await consumer.stop()
    return len(wanted) / (finished - started), len(wanted) / produce_s


WORKER = ("monitor.cli", "worker")


def start_processes(settings: Settings, module: Sequence[str], processes: int, log_path: Path, *,
                    cwd: Path = REPO_ROOT, settings_filter: Callable[[str], bool] = lambda _: True,
                    python: str = sys.executable) -> tuple[list[subprocess.Popen[bytes]], list[str], dict[str, str]]:
    """``processes`` of ``python -m module`` in ``cwd``, each on its own metrics port, answering ``/metrics``;
    their /metrics URLs and the last one's environment (``python``: the interpreter that runs them). This
    process's CONVMON_* and OPENAI_* variables are not passed on: the settings say what runs (``settings_filter``
    keeps only the CONVMON_* names an older checkout knows). A process that does not start stops them all."""
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CONVMON_", "OPENAI_"))}
    base.setdefault("HF_HUB_OFFLINE", "1")
    env: dict[str, str] = {}
    try:
        for i in range(processes):
            port = settings.metrics_port if i == 0 else free_port()
            chosen = settings_env(settings.model_copy(update={"metrics_port": port}))
            env = base | {k: v for k, v in chosen.items() if settings_filter(k)}
            with log_path.open("ab") as log:
                procs.append(subprocess.Popen([python, "-m", *module], env=env, stdout=log,
                                              stderr=subprocess.STDOUT, cwd=str(cwd)))
            urls.append(f"http://127.0.0.1:{port}/metrics")
        for proc, url in zip(procs, urls, strict=True):
            wait_for_metrics(url, proc, log_path=log_path)
    except BaseException:
        for proc in procs:
            stop_process(proc)
        raise
    return procs, urls, env


def monitor_rate(settings: Settings, bootstrap: str, warmup: list[tuple[bytes, bytes]],
                 measured: list[tuple[bytes, bytes]], log_path: Path, timeout_s: float,
                 processes: int = 1, broker_pid: int | None = None,
                 source: WorkerSource | None = None) -> dict[str, Any]:
    """Run ``processes`` worker processes (``convmon worker``) in one consumer group over the messages; their
    conversations / s and the largest peak RSS, and the CPU (cores) the workers, the broker (``broker_pid``)
    and this process used meanwhile. With ``source``, the workers run from there, and which code they imported
    is reported (``worker_code``)."""
    where = source or WorkerSource()
    procs, urls, env = start_processes(settings, WORKER, processes, log_path, cwd=where.checkout,
                                       settings_filter=where.settings_filter(), python=where.python)
    try:
        code = {"worker_code": worker_code(where.checkout, env, procs[0].pid, where.python)} if source else {}
        timing: dict[str, float] = {}
        rate, produce_rate = asyncio.run(_drive_worker(settings.kafka, bootstrap, warmup, measured, timeout_s,
                                                       [p.pid for p in procs], urls, timing, broker_pid))
        rss = [r for r in (peak_rss_mb(p.pid) for p in procs) if r is not None]
        return {"per_s": rate, "produce_per_s": produce_rate, "peak_rss_mb": max(rss) if rss else None,
                "processes": processes, **timing, **code}
    finally:
        for proc in procs:
            stop_process(proc)


def standalone_rates(distill: DistillSettings, stream: StreamSettings, rubric: RubricSet,
                     messages: Sequence[tuple[bytes, bytes]], warmup: Sequence[tuple[bytes, bytes]]
                     ) -> tuple[float, float]:
    """Conversations / s of (decode + featurize + predict + records) and of featurize alone, in-process.

    The warm-up messages are scored first, in one batch as large as the worker's warm-up: a model
    load plus a one-conversation batch leaves the first full batch (allocator, thread pools) cold.
    """
    scorer = DistilledScorer(ModelRegistry(distill.model_registry), rubric)
    batch = stream.classify_batch
    scorer.score_batch([Conversation.model_validate_json(v) for _, v in warmup[:batch]])
    batches = [[Conversation.model_validate_json(v) for _, v in messages[i : i + batch]]
               for i in range(0, len(messages), batch)]
    featurizer = scorer.live.featurizer  # type: ignore[union-attr]
    started = time.perf_counter()
    for conversations in batches:
        featurizer.transform(conversations)
    featurize_s = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(0, len(messages), batch):
        scorer.score_batch([Conversation.model_validate_json(v) for _, v in messages[i : i + batch]])
    return len(messages) / (time.perf_counter() - started), len(messages) / featurize_s


def judge_rate(rubric: RubricSet, messages: Sequence[tuple[bytes, bytes]], concurrency: int,
               latency_s: float) -> dict[str, Any]:
    """The judge client (SPUR mode) at ``concurrency`` against the test server with a fixed latency.

    Rate limits and budget are lifted so the client's own overhead and the concurrency show. One
    round of ``concurrency`` calls warms up first and is reported apart (``cold_ms``, and in
    ``p99_with_cold_ms``): the first calls of a process pay connection set-up and the openai
    client's lazy imports (0.1-0.3 s above the server's latency here), and at 400 calls those few
    alone can be the p99 of a steady-state client.
    """
    import numpy as np
    from prometheus_client import CollectorRegistry

    from monitor.contracts.metrics import Metrics
    from monitor.judge.build import build_judge
    from monitor.tools.openai_server import OpenAIServer
    conversations = [Conversation.model_validate_json(v) for _, v in messages]
    with OpenAIServer(latency_s=latency_s) as server:
        settings = Settings(openai_base_url=server.url, openai_api_key="bench", judge_concurrency=concurrency,
                            judge_requests_per_minute=1e9, judge_tokens_per_minute=1e12,
                            judge_daily_budget_usd=1e9)
        judge = build_judge(settings.judge, settings.rubrics, rubric, Metrics(CollectorRegistry()),
                            ledger_url=settings.label_store_url)
        latencies: list[float] = []
        cold: list[float] = []

        async def run() -> float:
            gate = asyncio.Semaphore(concurrency)

            async def one(conversation: Conversation, into: list[float]) -> None:
                async with gate:
                    started = time.perf_counter()
                    await judge.score(conversation)
                    into.append(time.perf_counter() - started)

            try:
                await asyncio.gather(*(one(c, cold) for c in conversations[:concurrency]))
                started = time.perf_counter()
                await asyncio.gather(*(one(c, latencies) for c in conversations))
                return time.perf_counter() - started
            finally:
                await judge.aclose()

        wall = asyncio.run(run())
    ms = np.array(latencies) * 1000
    return {"per_s": len(conversations) / wall, "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)), "cold_ms": 1000 * max(cold),
            "p99_with_cold_ms": float(np.percentile(np.concatenate([ms, np.array(cold) * 1000]), 99)),
            "concurrency": concurrency,
            "server_latency_ms": latency_s * 1000, "n": len(conversations)}
