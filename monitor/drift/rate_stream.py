"""An item's rate as the change-point detectors see it: one z-score per batch of conversations.

Each batch's mean is z-scored against the reference rate ``p0`` with the binomial standard error
``sqrt(p0 (1 - p0) / batch_size)``, ``p0`` clipped to [MIN_RATE, 1 - MIN_RATE] so rare items are not
hair-triggered; until ``p0`` is set the first ``reference_size`` values become it (see monitor.py).
"""

from __future__ import annotations

import numpy as np

from monitor.drift.cusum import CUSUM
from monitor.drift.page_hinkley import Mode, PageHinkley

MIN_RATE = 0.02


class RateStream:
    """An item's 0/1 (or probability) stream, batched and z-scored, fed to PH and CUSUM."""

    def __init__(self, *, direction: Mode, batch_size: int, reference_size: int) -> None:
        self.batch_size = batch_size
        self.reference_size = reference_size
        self._p0: float | None = None
        self._warmup: list[float] = []
        self._sum = 0.0
        self._n = 0
        self.detectors: dict[str, PageHinkley | CUSUM] = {
            "page_hinkley": PageHinkley(min_instances=10, delta=0.5, threshold=10.0, mode=direction),
            "cusum": CUSUM(k=0.5, h=10.0, target=0.0, sigma=1.0, mode=direction),
        }

    def set_p0(self, p0: float) -> None:
        self._p0 = p0
        self._warmup = []

    def update(self, x: float) -> list[str] | None:
        """Add one value; at a batch boundary return the detectors that fired, else None."""
        if self._p0 is None:
            self._warmup.append(x)
            if len(self._warmup) >= self.reference_size:
                self.set_p0(float(np.mean(self._warmup)))
            return None
        self._sum += x
        self._n += 1
        if self._n < self.batch_size:
            return None
        p0 = min(1 - MIN_RATE, max(MIN_RATE, self._p0))
        z = (self._sum / self._n - self._p0) / float(np.sqrt(p0 * (1 - p0) / self._n))
        self._sum, self._n = 0.0, 0
        fired = []
        for name, detector in self.detectors.items():
            detector.update(z)
            if detector.drift_detected:
                fired.append(name)
        return fired
