"""``bench open-conversations``: what N open conversations cost one worker, and how long they take to come back.

Anyone who can write to the input topic can open conversations, each held in memory until its
end, its idle timeout or eviction (``max_open_conversations`` per partition). This runs the embedded
broker and one real worker (``python -m monitor.cli worker``), sends N one-turn conversations that never
end, and reports the worker's RSS and live heap before and after, the open and evicted counts, the
latency of ``/metrics`` scraped every 0.5 s while it ingests, and, after a restart, how long the new
worker takes to be ready and to have every open conversation back (the sessions changelog's replay).
docs/operations.md has the numbers and the bounds they support.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.throughput_paths import produce_timed, settings_env
from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import Settings
from monitor.runtime.broker import EmbeddedBroker, free_port, stop_process
from monitor.runtime.scrape import scrape, total, wait_for_metrics

Progress = Callable[[str], None] | None
MB = 1e6


class _Worker:
    def __init__(self, settings: Settings, log: Path) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
        env.update(settings_env(settings.model_copy(update={"metrics_port": self.port})))
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "worker"], env=env, stdout=out,
                                         stderr=subprocess.STDOUT)

    def value(self, name: str, **labels: str) -> float:
        return total(scrape(f"{self.base}/metrics", timeout=10.0), name, **labels)

    def wait(self, what: str, ready: Callable[[], bool], timeout_s: float) -> float:
        """Seconds until ``ready()``; a ConfigError naming ``what`` after ``timeout_s``."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if self.proc.poll() is not None:
                raise ConfigError(f"the worker exited ({self.proc.returncode}) waiting for {what}; see {self.log}")
            try:
                if ready():
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise ConfigError(f"timed out after {timeout_s:.0f}s waiting for {what}; see {self.log}")

    def ready(self) -> bool:
        return httpx.get(f"{self.base}/readyz", timeout=5.0).status_code == 200


def _scrapes(url: str, stop: threading.Event, latencies: list[float]) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            httpx.get(url, timeout=5.0, headers={"accept-encoding": "gzip"})
            latencies.append(time.monotonic() - started)
        except httpx.HTTPError:
            latencies.append(float("inf"))
        stop.wait(0.5)


def _events(n: int) -> list[tuple[bytes, bytes]]:
    now = time.time()
    return [(f"oc{i}".encode(), orjson.dumps({"conversation_id": f"oc{i}", "turn_index": 0, "role": "user",
                                               "text": f"hello, I need help with order {i}", "timestamp": now}))
            for i in range(n)]


def run_open_conversations(conversations: int, max_open: int, partitions: int, timeout_s: float = 900.0,
                           progress: Progress = None) -> dict[str, Any]:
    say = progress or (lambda _: None)
    work = Path(tempfile.mkdtemp(prefix="convmon-open-"))
    result: dict[str, Any] = {"conversations": conversations, "max_open_conversations": max_open,
                              "partitions": partitions}
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        unique = uuid.uuid4().hex[:8]
        settings = Settings(app_id=f"bench-open-{unique}", topic_prefix=f"b{unique}.", data_dir=work,
                            model_registry=work / "models", label_store_url=f"sqlite:///{work / 'labels.db'}",
                            broker_url=f"kafka://{broker.bootstrap}", topic_partitions=partitions,
                            idle_timeout_s=1e6, sample_rate=0.0, max_open_conversations=max_open)
        worker = _Worker(settings, work / "worker-1.log")
        stop = threading.Event()
        try:
            wait_for_metrics(f"{worker.base}/metrics", worker.proc, log_path=worker.log, timeout=120.0)
            worker.wait("the worker to join", worker.ready, timeout_s)
            result["rss_mb_before"] = worker.value("process_resident_memory_bytes") / MB
            result["heap_mb_before"] = worker.value("convmon_process_heap_allocated_bytes") / MB
            latencies: list[float] = []
            scraper = threading.Thread(target=_scrapes, args=(f"{worker.base}/metrics", stop, latencies), daemon=True)
            scraper.start()
            say(f"sending {conversations} one-turn conversations")
            started = time.monotonic()
            asyncio.run(produce_timed(broker.bootstrap, settings.topic("events"), _events(conversations)))
            worker.wait("every turn consumed",
                        lambda: worker.value("convmon_events_total", kind="turn") >= conversations, timeout_s)
            result["ingest_s"] = time.monotonic() - started
            stop.set()
            scraper.join()
            time.sleep(5.0)  # let the allocator settle before reading RSS
            result["open"] = worker.value("convmon_open_conversations")
            result["evicted"] = worker.value("convmon_conversations_evicted_total")
            result["rss_mb_after"] = worker.value("process_resident_memory_bytes") / MB
            result["heap_mb_after"] = worker.value("convmon_process_heap_allocated_bytes") / MB
            grown = result["rss_mb_after"] - result["rss_mb_before"]
            result["rss_kb_per_open"] = round(grown * 1000 / result["open"], 2) if result["open"] else None
            done = sorted(x for x in latencies if x != float("inf"))
            result["scrapes"], result["scrape_failures"] = len(latencies), len(latencies) - len(done)
            result["scrape_s_p50"] = done[len(done) // 2] if done else None
            result["scrape_s_max"] = done[-1] if done else None
            result["exposition_bytes"] = len(httpx.get(f"{worker.base}/metrics", timeout=10.0).content)
        finally:
            stop.set()
            stop_process(worker.proc)
        say("restarting: the new worker replays the sessions changelog")
        restarted = time.monotonic()
        second = _Worker(settings, work / "worker-2.log")
        try:
            second.wait("the restarted worker to join", second.ready, timeout_s)
            result["restart_ready_s"] = time.monotonic() - restarted
            second.wait("every open conversation restored",
                        lambda: second.value("convmon_open_conversations") >= result["open"], timeout_s)
            result["restart_restored_s"] = time.monotonic() - restarted
            result["rss_mb_restored"] = second.value("process_resident_memory_bytes") / MB
        finally:
            stop_process(second.proc)
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}
