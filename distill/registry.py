"""Model registry: a versioned directory of artifacts, each weights (.npz) + a JSON manifest.

Layout: ``<root>/<kind>/<version>/{weights.npz, manifest.json}`` and ``<root>/<kind>/LIVE``
holding the live version. Arrays are loaded with ``allow_pickle=False`` so loading a model can
never execute code. Writes go to a temporary directory renamed into place, so a reader polling
the registry never sees a half-written version.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from monitor.contracts.errors import ModelError


class ModelRegistry:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def _kind_dir(self, kind: str) -> Path:
        return self.root / kind

    def versions(self, kind: str) -> list[str]:
        base = self._kind_dir(kind)
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if (p / "manifest.json").is_file())

    def publish(
        self, kind: str, arrays: dict[str, np.ndarray], manifest: dict[str, Any], *, promote: bool = False
    ) -> str:
        """Write a new version atomically and return its name (a sortable timestamp)."""
        base = self._kind_dir(kind)
        base.mkdir(parents=True, exist_ok=True)
        version = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{time.time_ns() % 1_000_000:06d}"
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
        try:
            np.savez_compressed(tmp / "weights.npz", **cast(dict[str, Any], arrays))
            full = {**manifest, "kind": kind, "version": version, "created_at": time.time()}
            (tmp / "manifest.json").write_text(json.dumps(full, indent=2, sort_keys=True), encoding="utf-8")
            os.rename(tmp, base / version)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if promote:
            self.promote(kind, version)
        return version

    def promote(self, kind: str, version: str) -> None:
        if version not in self.versions(kind):
            raise ModelError(f"cannot promote {kind}/{version}: no such version in {self.root}")
        live = self._kind_dir(kind) / "LIVE"
        tmp = live.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(version, encoding="utf-8")
        os.replace(tmp, live)

    def live_version(self, kind: str) -> str | None:
        live = self._kind_dir(kind) / "LIVE"
        try:
            return live.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None

    def load(self, kind: str, version: str | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Load a version (the live one by default) as plain arrays and a manifest dict."""
        version = version or self.live_version(kind)
        if version is None:
            raise ModelError(f"no live {kind!r} model in registry {self.root}")
        path = self._kind_dir(kind) / version
        try:
            manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
            with np.load(path / "weights.npz", allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load {kind}/{version} from {self.root}: {exc}") from exc
        return arrays, manifest

    def manifest(self, kind: str, version: str | None = None) -> dict[str, Any]:
        """A version's manifest alone (the live one by default): cheap, no arrays read."""
        version = version or self.live_version(kind)
        if version is None:
            raise ModelError(f"no live {kind!r} model in registry {self.root}")
        try:
            text = (self._kind_dir(kind) / version / "manifest.json").read_text(encoding="utf-8")
            manifest: dict[str, Any] = json.loads(text)
            return manifest
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read manifest of {kind}/{version} in {self.root}: {exc}") from exc

    def publish_if_better(
        self, kind: str, arrays: dict[str, np.ndarray], manifest: dict[str, Any], *, gate_passed: bool
    ) -> tuple[str, bool]:
        """Publish a candidate and promote it only when the promotion gate passed; (version, promoted).

        The candidate is kept either way so a rejected model can be inspected; the gate itself (same
        held-out data, tolerance) is computed by the trainer, which alone can run both models.
        """
        version = self.publish(kind, arrays, {**manifest, "gate_passed": gate_passed}, promote=gate_passed)
        return version, gate_passed
