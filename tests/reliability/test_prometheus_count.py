"""The fault suite's Prometheus count is exact: increase() at each series' last sample extrapolates nothing,
and the value a series is born with is reported apart (no increase() can see it)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, start_http_server

from monitor.runtime.broker import free_port
from tests.support.prometheus_server import PrometheusServer
from tests.support.workers import wait_until

pytestmark = pytest.mark.integration


def test_increases_are_exact_and_first_values_reported(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    counter = Counter("convmon_probe", "A probe counter.", ["series"], registry=registry)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    counter.labels("from_zero")  # exported at 0 before it counts
    prometheus = PrometheusServer(tmp_path, [f"127.0.0.1:{port}"], scrape_s=0.5)
    try:
        started = time.time()

        def scraped(value: float, series: str) -> bool:
            result = prometheus.query(f'convmon_probe_total{{series="{series}"}}')
            return bool(result) and float(result[0]["value"][1]) == value

        wait_until(lambda: scraped(0, "from_zero"), timeout=30, message="the zero scraped")
        counter.labels("from_zero").inc(5)
        counter.labels("born_late").inc(3)  # born at 3: its first sample is 3
        wait_until(lambda: scraped(5, "from_zero") and scraped(3, "born_late"), timeout=30, message="5 and 3")
        counter.labels("from_zero").inc(7)
        counter.labels("born_late").inc(4)
        wait_until(lambda: scraped(12, "from_zero") and scraped(7, "born_late"), timeout=30, message="12 and 7")
        time.sleep(2)  # more samples at the same values: the range then ends well after the last change
        found = {s.labels["series"]: s for s in prometheus.increases("convmon_probe_total", started)}
    finally:
        prometheus.stop()
        server.shutdown()
        thread.join()
    assert round(found["from_zero"].increase, 6) == 12 and found["from_zero"].first == 0
    assert round(found["born_late"].increase, 6) == 4 and found["born_late"].first == 3
