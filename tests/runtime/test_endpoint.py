"""The metrics endpoint under abuse: bounded connections and threads, read timeouts, three paths only.

Before the bounds: a thread per connection with no read timeout (1,000 half-sent requests held 1,006
threads 30 s later) and every path, ``/`` or ``/debug`` alike, answered with the whole exposition.
"""

from __future__ import annotations

import gzip
import resource
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from monitor.runtime.endpoint import Endpoint, serve_endpoint
from monitor.runtime.health import Health
from tests.support.workers import WorkerProcess, wait_until

HALF_SENT = 1000


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("convmon_things", "Things seen.", ["kind"], registry=registry).labels("a").inc(3)
    Counter("convmon_other", "Others.", registry=registry).inc()
    return registry


@pytest.fixture
def endpoint(registry: CollectorRegistry) -> Iterator[Endpoint]:
    health = Health(stall_s=5.0)
    served = serve_endpoint(Endpoint(health, registry, max_connections=64, request_timeout_s=1.0,
                                     write_timeout_s=2.0), "127.0.0.1", 0)
    yield served
    served.shutdown()


@pytest.fixture
def enough_files() -> None:
    """1,000 client sockets (and the server's) in one process: lift a 1,024 soft limit if the hard one allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 3 * HALF_SENT
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.fail(f"this test needs {need} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def get(port: int, path: str, **headers: str) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{port}{path}", headers=headers, timeout=5.0)


def test_only_the_three_paths_are_answered(endpoint: Endpoint) -> None:
    assert get(endpoint.port, "/healthz").status_code == 503  # the loop has not ticked yet
    endpoint.health.tick()
    assert get(endpoint.port, "/healthz").text.startswith("ok: the event loop ticked")
    assert get(endpoint.port, "/readyz").status_code == 503
    metrics = get(endpoint.port, "/metrics")
    assert metrics.status_code == 200 and 'convmon_things_total{kind="a"} 3.0' in metrics.text
    for path in ("/", "/debug", "/metricsx", "/metrics/", "/favicon.ico", "/healthz/x"):
        response = get(endpoint.port, path)
        assert response.status_code == 404 and "convmon_things" not in response.text, path
    post = httpx.post(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=5.0)
    assert post.status_code == 405 and post.headers["allow"] == "GET"
    for method, path, status in (("HEAD", "/metrics", 405), ("HEAD", "/nope", 404), ("OPTIONS", "/metrics", 405)):
        assert httpx.request(method, f"http://127.0.0.1:{endpoint.port}{path}", timeout=5.0).status_code == status


def test_metrics_query_accept_and_gzip(endpoint: Endpoint) -> None:
    plain = get(endpoint.port, "/metrics").text
    assert get(endpoint.port, "/metrics?x=1").text == plain  # other parameters are ignored, as documented
    only = get(endpoint.port, "/metrics?name[]=convmon_other_total").text
    assert "convmon_other_total" in only and "convmon_things" not in only
    openmetrics = get(endpoint.port, "/metrics", accept="application/openmetrics-text; version=1.0.0")
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.endswith("# EOF\n")
    with httpx.stream("GET", f"http://127.0.0.1:{endpoint.port}/metrics",
                      headers={"accept-encoding": "gzip"}, timeout=5.0) as response:
        assert response.headers["content-encoding"] == "gzip"
        assert gzip.decompress(b"".join(response.iter_raw())).decode() == plain


def test_a_failing_collector_answers_500_and_the_probes_still_work(registry: CollectorRegistry,
                                                                    endpoint: Endpoint) -> None:
    class Broken:
        def collect(self) -> list[object]:
            raise RuntimeError("boom")

    registry.register(Broken())  # type: ignore[arg-type]
    assert get(endpoint.port, "/metrics").status_code == 500
    assert get(endpoint.port, "/readyz").status_code == 503  # answered: not ready, not broken


def test_garbage_and_oversized_heads_get_400(endpoint: Endpoint) -> None:
    for raw in (b"NOT HTTP AT ALL\r\n\r\n", b"GET /metrics HTTP/1.1\r\nX: " + b"y" * 20_000 + b"\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=5) as sock:
            sock.sendall(raw)
            assert sock.recv(100).startswith(b"HTTP/1.1 400 ")


def _half_sent(port: int, n: int) -> list[socket.socket]:
    sockets = []
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never the blank line that ends the head
        sockets.append(sock)
    return sockets


def _closed_by_server(sockets: list[socket.socket]) -> bool:
    """Every one of ``sockets`` reads end-of-stream (or a reset): the server closed it."""
    poll = select.poll()  # not select(): descriptors past 1,023
    for sock in sockets:
        poll.register(sock, select.POLLIN)
    if len(poll.poll(0)) < len(sockets):
        return False
    for sock in sockets:
        try:
            if sock.recv(1) != b"":
                return False
        except ConnectionResetError:
            pass
    return True


def test_a_thousand_half_sent_connections_cost_no_threads_and_time_out(endpoint: Endpoint,
                                                                       enough_files: None) -> None:
    threads = threading.active_count()
    sockets = _half_sent(endpoint.port, HALF_SENT)
    try:
        assert threading.active_count() == threads  # one loop thread, whatever the clients do
        assert endpoint.open_connections <= 64  # the oldest were closed to make room
        started = time.monotonic()
        assert get(endpoint.port, "/metrics").status_code == 200  # a scrape still gets in
        # not queued behind them: 1,000 half-sent requests held 64 at a time for request_timeout_s=1 would take
        # about 16 s; half of that is the bound (3.0-3.7 s were seen at load 10-15 on 2 cores: a timing, not the
        # property)
        assert time.monotonic() - started < 8.0
        wait_until(lambda: _closed_by_server(sockets[-64:]), 10, interval=0.2,
                   message="the server to time the half-sent requests out (request_timeout_s=1)")
        assert endpoint.open_connections == 0
        assert _closed_by_server(sockets[:-64])  # evicted long before, to make room
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.integration
def test_a_worker_survives_a_thousand_half_sent_connections(broker: str, make_settings, tmp_path: Path,
                                                            enough_files: None) -> None:
    """1,000 half-sent connections on a real worker: its thread count stays put, /metrics answers, /debug 404s."""
    settings = make_settings(broker_url=f"kafka://{broker}")
    with WorkerProcess(settings, tmp_path / "w.log") as worker:
        assert worker.proc is not None
        status = Path(f"/proc/{worker.proc.pid}/status")

        def threads() -> int:
            line = next(x for x in status.read_text().splitlines() if x.startswith("Threads:"))
            return int(line.split()[1])

        before = threads()
        sockets = _half_sent(worker.port, HALF_SENT)
        try:
            started = time.monotonic()
            assert get(worker.port, "/metrics").status_code == 200
            took = time.monotonic() - started
            assert threads() <= before + 4, f"{before} threads before, {threads()} after"  # was before + 1,000
            assert get(worker.port, "/debug").status_code == 404 and get(worker.port, "/").status_code == 404
            assert took < 2.0, took
        finally:
            for sock in sockets:
                sock.close()
