"""The worker's HTTP endpoint: ``/metrics``, ``/healthz`` and ``/readyz``, with bounds an abuser cannot lift.

It runs on its own thread with its own asyncio loop, never on faust's: a blocked app loop must
still be reported by ``/healthz`` (the probe reads the heartbeat the loop stopped writing), and
rendering a 2 MB exposition must not stall the hot path. A connection is a coroutine, not a
thread, so 1,000 idle clients cost sockets, not stacks (the WSGI server this replaces started a
thread per connection and never timed a read out: 1,000 half-sent requests held 1,006 threads).

Bounds (constants here, documented in docs/deployment.md):

- at most ``max_connections`` open at once; a new one beyond that closes the *oldest* first, so
  idle or slow clients cannot lock Prometheus and the kubelet out (a real scrape sends its
  request at once and is answered in milliseconds, long before it is the oldest);
- the request line and headers must arrive within ``request_timeout_s`` and fit
  ``MAX_HEAD_BYTES`` (h11 parses them); the answer must be taken within ``write_timeout_s``;
- one request per connection (``Connection: close``); only ``GET`` (405 otherwise), and only the
  three paths (404 elsewhere). ``/metrics`` honours prometheus_client's ``name[]`` filter, Accept
  (OpenMetrics, hence exemplars) and gzip; other query parameters are ignored, as
  prometheus_client's own handler does, so ``/metrics?x=1`` is ``/metrics``.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import socket
import threading
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import h11
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder

from monitor.runtime.health import Health

log = logging.getLogger(__name__)
MAX_CONNECTIONS = 128
REQUEST_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 16 * 1024
BACKLOG = 1024  # connections the kernel queues before accept: a burst waits there, not in SYN retries
PATHS = ("/metrics", "/healthz", "/readyz")
Headers = list[tuple[str, str]]


class Endpoint:
    """Serves one listening socket until :meth:`shutdown`; :func:`serve_endpoint` starts it on a thread."""

    def __init__(self, health: Health, registry: CollectorRegistry = REGISTRY, *,
                 max_connections: int = MAX_CONNECTIONS, request_timeout_s: float = REQUEST_TIMEOUT_S,
                 write_timeout_s: float = WRITE_TIMEOUT_S) -> None:
        self.health = health
        self.registry = registry
        self.max_connections = max_connections
        self.request_timeout_s = request_timeout_s
        self.write_timeout_s = write_timeout_s
        self.probes: dict[str, Callable[[], tuple[bool, str]]] = {"/healthz": health.live, "/readyz": health.ready}
        self._open: dict[asyncio.Task[None], None] = {}  # insertion order: oldest first
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread: threading.Thread | None = None
        self.port = 0  # the bound port, once served (a port of 0 asks the kernel for a free one)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def start(self, sock: socket.socket) -> None:
        """Serve ``sock`` from a daemon thread; returns once it accepts connections."""
        self._thread = threading.Thread(target=self.run, args=(sock,), name="convmon-http", daemon=True)
        self._thread.start()
        if not self._started.wait(10.0):
            raise RuntimeError("the metrics endpoint did not start in 10 s")

    def run(self, sock: socket.socket) -> None:
        """The thread's body: an event loop of its own, until :meth:`shutdown`."""
        asyncio.run(self._main(sock))

    async def _main(self, sock: socket.socket) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._accept, sock=sock, backlog=BACKLOG)
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(self._open):
                task.cancel()
            await asyncio.gather(*self._open, return_exceptions=True)

    def shutdown(self, timeout: float = 5.0) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        while len(self._open) >= self.max_connections:  # make room: the oldest goes
            oldest = next(iter(self._open))
            del self._open[oldest]
            oldest.cancel()
        self._open[task] = None
        try:
            await self._serve(reader, writer)
        except (TimeoutError, asyncio.CancelledError, ConnectionError, h11.ProtocolError):
            pass  # evicted, slow, vanished or garbled: nothing more to say to this client
        finally:
            self._open.pop(task, None)
            writer.transport.abort()  # a no-op after a clean close; never linger on a client that does not read

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        try:
            request = await asyncio.wait_for(_read_head(conn, reader), self.request_timeout_s)
        except h11.RemoteProtocolError:
            request = None
        if request is None:  # closed early, or not HTTP: a plain 400 (h11 refuses to answer a broken stream)
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        else:
            try:
                status, headers, body = self.answer(request)
            except Exception:  # a collector that fails must not cost the probes their endpoint
                log.exception("the metrics endpoint failed to answer %s", request.target[:100])
                status, headers, body = 500, _TEXT, b"internal error: see the worker's log\n"
            writer.write(_response(conn, status, headers, body, with_body=request.method != b"HEAD"))
        writer.close()  # flushes the answer, then closes; a client that does not read it times out
        await asyncio.wait_for(writer.wait_closed(), self.write_timeout_s)

    def answer(self, request: h11.Request) -> tuple[int, Headers, bytes]:
        target = urlsplit(request.target.decode("latin-1"))
        if target.path not in PATHS:
            return 404, _TEXT, b"not found: this endpoint serves /metrics, /healthz and /readyz\n"
        if request.method != b"GET":
            return 405, [*_TEXT, ("Allow", "GET")], b"method not allowed: use GET\n"
        probe = self.probes.get(target.path)
        if probe is not None:
            ok, why = probe()
            return (200 if ok else 503), _TEXT, (why + "\n").encode()
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in request.headers}
        encoder, content_type = choose_encoder(headers.get("accept", ""))
        names = parse_qs(target.query).get("name[]")
        body = encoder(self.registry.restricted_registry(names) if names else self.registry)
        out = [("Content-Type", content_type)]
        if "gzip" in headers.get("accept-encoding", ""):
            body = gzip.compress(body, compresslevel=1)  # 2 MB in ~15 ms; Prometheus asks for gzip
            out.append(("Content-Encoding", "gzip"))
        return 200, out, body


_TEXT: Headers = [("Content-Type", "text/plain; charset=utf-8")]


async def _read_head(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Request | None:
    while True:
        event = conn.next_event()
        if isinstance(event, h11.Request):
            return event
        if event is not h11.NEED_DATA:
            return None
        data = await reader.read(4096)
        if not data:
            return None
        conn.receive_data(data)


def _response(conn: h11.Connection, status: int, headers: Headers, body: bytes, *, with_body: bool) -> bytes:
    """The answer's bytes; a HEAD request's carries the headers only (h11 refuses a body there)."""
    head = h11.Response(status_code=status,
                        headers=[*headers, ("Content-Length", str(len(body))), ("Connection", "close")])
    parts = [conn.send(head), conn.send(h11.Data(data=body)) if with_body else b"", conn.send(h11.EndOfMessage())]
    return b"".join(part for part in parts if part)


def _listen(host: str, port: int) -> socket.socket:
    """Bind in the caller's thread, so a taken port fails the worker's start, not a background thread.
    The family comes from the host ("::" binds IPv6 and, as Linux defaults, IPv4 too: as /metrics did)."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def serve_endpoint(endpoint: Endpoint, host: str, port: int) -> Endpoint:
    """Serve ``endpoint`` on ``host:port`` from a daemon thread; returns it (``shutdown()`` stops it)."""
    sock = _listen(host, port)
    endpoint.port = int(sock.getsockname()[1])
    endpoint.start(sock)
    return endpoint
