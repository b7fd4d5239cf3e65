"""Follow one kind's ``LIVE`` pointer in the model registry and hot-swap the loaded artifact.

Workers never restart to pick up a model. Every ``poll_s`` seconds :meth:`LiveModel.maybe_reload`
reads the kind's ``LIVE`` file (a few bytes); when it names a new version, ``load(version)`` builds
the artifact and one reference assignment swaps it in, so a reader that took :attr:`LiveModel.live`
once uses exactly one version. A version that fails to load (another rubric set, corrupt arrays)
is logged and refused once instead of being re-read every poll; the previous model keeps serving.

Used by the distilled scorer (``monitor/stages/classify.py``) and the calibration scorer
(``monitor/stages/calibrate.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from distill.registry import ModelRegistry

log = logging.getLogger(__name__)
T = TypeVar("T")


class LiveModel(Generic[T]):
    """The registry's live version of ``kind``, loaded by ``load`` and reloaded when ``LIVE`` moves.

    >>> import tempfile
    >>> registry = ModelRegistry(tempfile.mkdtemp())
    >>> live = LiveModel(registry, "demo", load=lambda version: f"model {version}")
    >>> live.maybe_reload(), live.live
    (False, None)
    """

    def __init__(self, registry: ModelRegistry, kind: str, load: Callable[[str], T], *, poll_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = registry
        self.kind = kind
        self.load = load
        self.poll_s = poll_s
        self.clock = clock
        self._live: tuple[str, T] | None = None
        self._last_poll: float | None = None
        self._refused: str | None = None  # a version already refused: don't reload it every poll
        self._lock = threading.Lock()

    @property
    def live(self) -> tuple[str, T] | None:
        """``(version, artifact)`` of the serving model, or None before the first successful load."""
        return self._live

    @property
    def version(self) -> str | None:
        live = self._live
        return live[0] if live else None

    @property
    def refused(self) -> str | None:
        """The last version that failed to load (kept out until ``LIVE`` names another one)."""
        return self._refused

    def maybe_reload(self, *, force: bool = False) -> bool:
        """Swap in the registry's live version if it changed; True when a new model was loaded.

        At most one registry read per ``poll_s`` (unless ``force``). Any failure to read or load
        is logged and leaves the current model serving: a bad artifact must not stop a worker.
        """
        now = self.clock()
        if not force and self._last_poll is not None and now - self._last_poll < self.poll_s:
            return False
        with self._lock:
            self._last_poll = now
            try:
                version = self.registry.live_version(self.kind)
            except OSError as exc:
                log.warning("cannot read the live %s version in %s: %s", self.kind, self.registry.root, exc)
                return False
            current = self.version
            if version is None or version == current or version == self._refused:
                return False
            try:
                loaded = self.load(version)
            except Exception as exc:  # any broken artifact: refuse it, keep serving the current one
                log.warning("refusing %s model %s: %s", self.kind, version, exc)
                self._refused = version
                return False
            self._live = (version, loaded)
            log.info("%s model %s is live (was %s)", self.kind, version, current)
            return True
