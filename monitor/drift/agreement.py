"""Judge vs distilled agreement on the shadow-scored slice, over a sliding window."""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from monitor.drift.base import DriftDetector


def average_ranks(values: list[float]) -> np.ndarray:
    """1-based ranks with ties given their average rank (scipy.stats.rankdata's default, which would cost the
    worker a second and a half of CPU to import)."""
    _, inverse, counts = np.unique(np.asarray(values, dtype=float), return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # the rank of each distinct value's last occurrence
    return (last - (counts - 1) / 2.0)[inverse]


class Agreement(DriftDetector):
    """Accuracy (distilled at 0.5) and AUC of distilled probabilities against judge verdicts.

    ``update((judge_verdict, distilled_probability))`` adds one shadow pair. The judge is the
    teacher, so falling agreement means the distilled model no longer tracks it: drift in the
    input, in the judge, or a bad retrain. Accuracy alone flatters rare items (always "no" is
    98% right on a 2% item), hence the AUC, which is NaN until both verdicts are in the window.

    Parameters
    ----------
    window_size
        Most recent pairs kept.
    min_samples
        Pairs needed before a drop can be flagged.
    min_accuracy
        Accuracy below which ``drift_detected`` is True.
    min_auc
        AUC below which ``drift_detected`` is True.

    Examples
    --------
    >>> import random
    >>> rng = random.Random(42)
    >>> agreement = Agreement(window_size=200)
    >>> for _ in range(200):
    ...     y = rng.random() < 0.3
    ...     agreement.update((y, min(1.0, max(0.0, 0.7 * y + 0.15 + rng.gauss(0, 0.15)))))
    >>> agreement.drift_detected, round(agreement.accuracy, 2), round(agreement.auc, 2)
    (False, 0.97, 0.99)
    >>> for _ in range(200):  # the distilled model stops tracking the judge
    ...     agreement.update((rng.random() < 0.3, rng.random()))
    >>> agreement.drift_detected, round(agreement.accuracy, 2), round(agreement.auc, 2)
    (True, 0.48, 0.5)

    References
    ----------
    Hanley, J. A., McNeil, B. J. (1982). The meaning and use of the area under a receiver operating
    characteristic (ROC) curve. *Radiology*, 143(1), 29-36.
    Lin, Y.-C. et al. (2024). Interpretable user satisfaction estimation for conversational systems
    with large language models (SPUR). *ACL 2024*: distillation of rubric items.
    """

    def __init__(
        self, *, window_size: int = 500, min_samples: int = 50, min_accuracy: float = 0.8, min_auc: float = 0.7
    ) -> None:
        super().__init__()
        self.window_size = window_size
        self.min_samples = min_samples
        self.min_accuracy = min_accuracy
        self.min_auc = min_auc
        self._pairs: deque[tuple[bool, float]] = deque(maxlen=window_size)
        self._correct = 0
        self._auc: float | None = None  # cached until the next update

    @property
    def n(self) -> int:
        """Pairs in the window."""
        return len(self._pairs)

    @property
    def accuracy(self) -> float:
        """Share of pairs where ``probability >= 0.5`` equals the judge's verdict; NaN when empty."""
        return self._correct / len(self._pairs) if self._pairs else math.nan

    @property
    def auc(self) -> float:
        """Mann-Whitney AUC of the probabilities for judge-yes vs judge-no; NaN without both."""
        if self._auc is None:
            y = np.fromiter((p[0] for p in self._pairs), dtype=bool, count=len(self._pairs))
            pos = int(y.sum())
            neg = len(y) - pos
            if pos == 0 or neg == 0:
                self._auc = math.nan
            else:
                ranks = average_ranks([p[1] for p in self._pairs])
                self._auc = float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))
        return self._auc

    @property
    def drift_detected(self) -> bool:
        """Computed on read (the AUC is a sort of the window), so reading it rarely keeps updates cheap."""
        if len(self._pairs) < self.min_samples:
            return False
        auc = self.auc
        return self.accuracy < self.min_accuracy or (not math.isnan(auc) and auc < self.min_auc)

    def update(self, x: tuple[bool, float]) -> None:
        verdict, probability = bool(x[0]), float(x[1])
        if len(self._pairs) == self.window_size:
            old_v, old_p = self._pairs[0]
            self._correct -= (old_p >= 0.5) == old_v
        self._pairs.append((verdict, probability))
        self._correct += (probability >= 0.5) == verdict
        self._auc = None
