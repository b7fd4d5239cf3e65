"""Population stability index of a score distribution: sliding window vs reference."""

from __future__ import annotations

import numpy as np

from monitor.drift.base import HistogramDetector


class PSI(HistogramDetector):
    """Population stability index, ``sum((w - r) * ln(w / r))`` over equal-mass reference bins.

    The credit-scoring rule of thumb reads PSI < 0.1 as stable, 0.1-0.25 as a moderate shift and
    > 0.25 as a significant one; ``threshold`` defaults to that last boundary. The window must be
    full before the index is computed: on stationary data a window of 500 against a reference of 1000
stays below ~0.1 (``tests/drift/test_histograms.py`` measures it).

    Parameters
    ----------
    window_size
        Recent values compared with the reference.
    reference_size
        Values kept as the reference when :meth:`set_reference` was not called (first-N fallback).
    n_bins
        Quantile bins of the reference.
    threshold
        PSI above which ``drift_detected`` is True.

    Examples
    --------
    >>> import random
    >>> rng = random.Random(42)
    >>> psi = PSI(window_size=500, reference_size=1000)
    >>> for _ in range(2000):
    ...     psi.update(rng.betavariate(2, 8))
    >>> psi.drift_detected, round(psi.value, 3)
    (False, 0.009)
    >>> for _ in range(500):
    ...     psi.update(rng.betavariate(4, 6))
    >>> psi.drift_detected, round(psi.value, 2)
    (True, 2.02)

    References
    ----------
    Siddiqi, N. (2006). *Credit Risk Scorecards*, ch. 8. Wiley.
    Yurdakul, B. (2018). *Statistical properties of population stability index*. PhD thesis,
    Western Michigan University.
    """

    def __init__(
        self, *, window_size: int = 500, reference_size: int = 1000, n_bins: int = 10, threshold: float = 0.25
    ) -> None:
        super().__init__(window_size=window_size, reference_size=reference_size, n_bins=n_bins, threshold=threshold)

    @staticmethod
    def _divergence(current: np.ndarray, reference: np.ndarray) -> float:
        return float(np.sum((current - reference) * np.log(current / reference)))
