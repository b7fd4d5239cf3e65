"""A local S3 server (moto's, a dev dependency) so the embedded Tansu broker can keep its topics in a bucket
that outlives the broker process: the durable storage the broker-restart fault needs."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx

from monitor.runtime.broker import EmbeddedBroker, free_port, stop_process
from tests.support.workers import wait_until


class S3Server:
    """``python -m moto.server`` on 127.0.0.1 with one bucket; use as a context manager."""

    def __init__(self, log_path: Path, bucket: str = "tansu") -> None:
        self.port = free_port()
        self.bucket = bucket
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        with self.log_path.open("ab") as log:
            command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
            self._proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

        def up() -> bool:
            assert self._proc is not None and self._proc.poll() is None, self.log_path.read_text(errors="replace")
            return httpx.get(self.endpoint, timeout=1).status_code < 500

        wait_until(up, timeout=60, interval=0.2, message="the moto S3 server")
        created = httpx.put(f"{self.endpoint}/{self.bucket}", timeout=10)
        assert created.status_code == 200, created.text
        return self

    def broker_env(self) -> dict[str, str]:
        """What Tansu's S3 engine (object_store) reads: endpoint, plain HTTP allowed, dummy credentials."""
        return {"AWS_ENDPOINT": self.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "test",
                "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}

    def broker(self, *, port: int | None = None, log_path: Path | None = None) -> EmbeddedBroker:
        """An embedded broker (not started) storing its topics in this server's bucket."""
        return EmbeddedBroker(port=port, log_path=log_path, storage_engine=f"s3://{self.bucket}/",
                              env=self.broker_env())

    def keys(self, prefix: str) -> list[str]:
        """The bucket's object keys under ``prefix`` (ListObjectsV2, every page)."""
        out: list[str] = []
        params = {"list-type": "2", "prefix": prefix}
        while True:
            page = httpx.get(f"{self.endpoint}/{self.bucket}", params=params, timeout=30)
            page.raise_for_status()
            out += re.findall(r"<Key>([^<]+)</Key>", page.text)
            token = re.search(r"<NextContinuationToken>([^<]+)</NextContinuationToken>", page.text)
            if token is None:
                return out
            params["continuation-token"] = token.group(1)

    def batches_per_partition(self, topic: str) -> dict[int, int]:
        """How many record batches (one object each) Tansu's S3 engine holds per partition of ``topic``: what a
        fetch from the start has to go through ."""
        pattern = re.compile(rf"/topics/{re.escape(topic)}/partitions/(\d+)/records/")
        counts = Counter(int(m.group(1)) for m in map(pattern.search, self.keys("clusters/")) if m)
        return dict(sorted(counts.items()))

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
