"""The worker's HTTP endpoint: /metrics, and the probes /healthz (liveness) and /readyz (readiness).

Liveness: the event loop ticked within ``health_stall_s``. A loop blocked by a synchronous call
stops the heartbeat timer, so the probe fails while the HTTP thread still answers; Kubernetes then
restarts the pod. Before the loop's first tick the worker is starting (503), which is what a
startup probe waits for.

Readiness: joined the consumer group (faust sent ``on_rebalance_complete`` at least once: an idle
member that got no partitions is ready too) and not stalled. Served by the standard library's WSGI
server around prometheus_client's app, on the metrics port: no extra port, no dependency.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any, cast
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app

if TYPE_CHECKING:
    import faust
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

HEARTBEAT_S = 1.0


class Health:
    """Thread-safe enough by construction: the loop writes two fields, the HTTP threads only read them."""

    def __init__(self, stall_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_s = stall_s
        self.clock = clock
        self.last_tick: float | None = None
        self.joined = False
        self.assigned: Callable[[], int] | None = None  # input partitions this member owns, for the probe's text

    def tick(self) -> None:
        self.last_tick = self.clock()

    def live(self) -> tuple[bool, str]:
        if self.last_tick is None:
            return False, "starting: the event loop has not ticked yet"
        age = self.clock() - self.last_tick
        if age > self.stall_s:
            return False, f"stalled: the event loop last ticked {age:.0f}s ago (health_stall_s={self.stall_s:g})"
        return True, f"ok: the event loop ticked {age:.1f}s ago"

    def ready(self) -> tuple[bool, str]:
        live, why = self.live()
        if not live:
            return False, why
        if not self.joined:
            return False, "not ready: has not joined the consumer group yet"
        owned = f" (input partitions assigned: {self.assigned()})" if self.assigned is not None else ""
        return True, f"ok: joined the consumer group{owned}; event loop ticking"


def register_health(app: faust.App, health: Health, input_topic: str) -> None:
    """The heartbeat timer, and the group join, on the app's own loop; the probe counts partitions of
    ``input_topic`` only (not convmon's own topics or changelogs)."""

    @app.timer(HEARTBEAT_S)
    async def heartbeat() -> None:
        health.tick()

    async def joined(sender: object, *args: object, **kwargs: object) -> None:
        health.joined = True

    app.on_rebalance_complete.connect(joined)  # type: ignore[arg-type]  # as in ownership.py
    health.assigned = lambda: sum(1 for tp in app.consumer.assignment() if tp.topic == input_topic)


def health_app(health: Health, registry: CollectorRegistry = REGISTRY) -> Callable[..., Iterable[bytes]]:
    metrics = make_wsgi_app(registry)
    probes = {"/healthz": health.live, "/readyz": health.ready}

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        probe = probes.get(environ.get("PATH_INFO", ""))
        if probe is None:
            return cast("Iterable[bytes]", metrics(environ, start_response))
        ok, why = probe()
        body = (why + "\n").encode()
        start_response("200 OK" if ok else "503 Service Unavailable",
                       [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
        return [body]

    return app


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        """Probes every few seconds must not fill the log."""


def serve_health(health: Health, host: str, port: int) -> WSGIServer:
    """Serve /metrics, /healthz and /readyz in a daemon thread; returns the server (``shutdown()`` stops it)."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("Server", (_Server,), {"address_family": family})  # "::" binds IPv6, as /metrics did
    server: WSGIServer = make_server(host, port, health_app(health), server_class=server_class,
                                     handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="convmon-http", daemon=True).start()
    return server
