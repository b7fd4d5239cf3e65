"""Reading a worker's /metrics back into numbers: for the demo's table and for tests."""

from __future__ import annotations

import functools
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from monitor.contracts.errors import ConfigError

Sample = tuple[str, dict[str, str], float]  # metric name, labels, value


@functools.cache
def local_http() -> httpx.Client:
    """One client for the reads of local endpoints (a worker's /metrics, a local Prometheus): ``httpx.get`` builds
    a client, and loads the CA bundle, on every call, about 30 ms of CPU for each scrape of a screen or a test."""
    return httpx.Client()


def scrape(url: str, timeout: float = 2.0) -> list[Sample]:
    text = local_http().get(url, timeout=timeout).text
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def total(samples: list[Sample], name: str, **match: str) -> float:
    """Sum of a metric's samples whose labels match, over every other label (dimensions, workers)."""
    return sum(v for n, labels, v in samples if n == name and all(labels.get(k) == x for k, x in match.items()))


def by_label(samples: list[Sample], name: str, label: str,
             **match: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for n, labels, v in samples:
        if n == name and all(labels.get(k) == x for k, x in match.items()):
            out[labels.get(label, "")] += v
    return dict(out)


def wait_for_metrics(url: str, proc: subprocess.Popen[bytes], *, log_path: Path, timeout: float = 90.0) -> None:
    """Block until a worker process answers on ``url``; fail at once, with its log, if it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:] if log_path.exists() else ""
            raise ConfigError(f"the worker exited with code {proc.returncode}; {log_path} ends with:\n{tail}")
        try:
            local_http().get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise ConfigError(f"the worker's {url} did not come up in {timeout}s; see {log_path}")
