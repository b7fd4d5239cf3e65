"""The drift-detector contract, after River's ``river.base.DriftDetector``.

A detector consumes one value at a time with ``update(x)`` and exposes a read-only
``drift_detected``. Hyper-parameters are public attributes named as in ``__init__``; state is
private. Change-point detectors (Page-Hinkley, CUSUM) reset themselves on the update that follows
a detection, as River's do; window-vs-reference detectors (PSI, JSD, agreement) report a state.
"""

from __future__ import annotations

import abc
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np


class DriftDetector(abc.ABC):
    """Base class: ``update(x)`` consumes one observation; ``drift_detected`` reads the verdict."""

    def __init__(self) -> None:
        self._drift_detected = False

    @property
    def drift_detected(self) -> bool:
        """Whether the last update flagged drift."""
        return self._drift_detected

    @abc.abstractmethod
    def update(self, x: Any) -> None:
        """Consume one observation."""


class HistogramDetector(DriftDetector):
    """A sliding window of values in [0, 1] histogrammed against a reference histogram.

    The bin edges are the reference's quantiles (equal-mass bins, the usual choice for PSI), so
    a probability concentrated near 0 still gets resolution (equal-width bins when ties collapse
    them). The reference is given with :meth:`set_reference` or, failing that, is the first
    ``reference_size`` values seen.
    Both histograms get additive smoothing of half a count per bin, so empty bins never divide by 0.
    """

    def __init__(self, *, window_size: int, reference_size: int, n_bins: int, threshold: float) -> None:
        super().__init__()
        if window_size < 1 or reference_size < 1 or n_bins < 2:
            raise ValueError(
                f"window_size and reference_size must be >= 1 and n_bins >= 2. "
                f"Got {window_size}, {reference_size}, {n_bins} instead."
            )
        self.window_size = window_size
        self.reference_size = reference_size
        self.n_bins = n_bins
        self.threshold = threshold
        self._pending: list[float] = []
        self._edges: list[float] | None = None
        self._reference: np.ndarray | None = None
        self._reference_n = 0
        self._window: deque[int] = deque()
        self._counts: list[int] = []
        self._value = math.nan
        self._stale = False

    def set_reference(self, values: Iterable[float]) -> None:
        """Fix the reference distribution (e.g. the model's scores on its training data)."""
        ref = np.clip(np.asarray(list(values), dtype=float), 0.0, 1.0)
        if ref.size == 0:
            raise ValueError("The reference must hold at least one value. Got an empty array instead.")
        inner = np.unique(np.quantile(ref, np.linspace(0, 1, self.n_bins + 1)[1:-1]))
        if len(inner) < self.n_bins - 1:  # tied reference (e.g. a constant): quantiles collapse
            inner = np.linspace(0, 1, self.n_bins + 1)[1:-1]
        self._edges = [float(e) for e in inner]
        bins = np.searchsorted(inner, ref, side="right")
        self._reference = self._smooth(np.bincount(bins, minlength=len(inner) + 1))
        self._reference_n = int(ref.size)
        self._pending = []
        self._window.clear()
        self._counts = [0] * (len(inner) + 1)
        self._value = math.nan
        self._stale = False

    @property
    def reference_n(self) -> int:
        """Observations behind the reference (0 while the first-N fallback is filling)."""
        return self._reference_n

    @property
    def value(self) -> float:
        """The divergence of the current window from the reference; NaN until the window is full."""
        if self._stale:  # computed on read: a worker updates far more often than it exports
            assert self._reference is not None
            self._value = self._divergence(self._smooth(np.asarray(self._counts)), self._reference)
            self._stale = False
        return self._value

    @property
    def drift_detected(self) -> bool:
        return self.value > self.threshold  # NaN compares False

    def update(self, x: float) -> None:
        x = min(1.0, max(0.0, float(x)))
        if self._edges is None:
            self._pending.append(x)
            if len(self._pending) >= self.reference_size:
                self.set_reference(self._pending)
            return
        b = bisect_right(self._edges, x)
        self._window.append(b)
        self._counts[b] += 1
        if len(self._window) > self.window_size:
            self._counts[self._window.popleft()] -= 1
        self._stale = len(self._window) == self.window_size

    @staticmethod
    def _smooth(counts: np.ndarray) -> np.ndarray:
        smoothed: np.ndarray = counts.astype(float) + 0.5
        out: np.ndarray = smoothed / smoothed.sum()
        return out

    @staticmethod
    @abc.abstractmethod
    def _divergence(current: np.ndarray, reference: np.ndarray) -> float:
        """Divergence of two probability vectors over the same bins."""
