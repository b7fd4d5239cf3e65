"""How uncertain the distilled models are about a conversation: shared by the router and the trainer.

The router raises a conversation's judge probability with it (monitor/stages/sampler.py); the
trainer stores the mean over the hash slice of its training data with each model version (the
router's normaliser), so both must measure it the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from monitor.contracts.errors import ConfigError

Measure = Literal["margin", "entropy"]


def uncertainty(probabilities: Sequence[float], *, measure: Measure = "margin") -> float:
    """Uncertainty in [0, 1] of one conversation: the max over items (the least certain item decides).

    ``margin``: 1 - |2p - 1|; ``entropy``: binary entropy in bits.

    >>> uncertainty([0.99, 0.5]), round(uncertainty([0.9], measure="entropy"), 3)
    (1.0, 0.469)
    """
    if not probabilities:
        return 0.0
    if measure == "margin":
        return max(1.0 - abs(2.0 * p - 1.0) for p in probabilities)
    if measure == "entropy":
        return max(0.0 if p in (0.0, 1.0) else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
                   for p in probabilities)
    raise ConfigError(f"uncertainty measure must be 'margin' or 'entropy'. Got {measure!r} instead.")


def mean_uncertainty(proba: np.ndarray, measure: Measure) -> float | None:
    """Mean per-conversation uncertainty of an (n, items) probability matrix (NaN = no prediction).

    >>> mean_uncertainty(np.array([[0.5, np.nan], [0.0, 1.0]]), "margin")
    0.5
    """
    p = np.clip(np.asarray(proba, dtype=float), 1e-12, 1 - 1e-12)
    if measure == "margin":
        per = 1.0 - np.abs(2.0 * p - 1.0)
    elif measure == "entropy":
        per = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
    else:
        raise ConfigError(f"uncertainty measure must be 'margin' or 'entropy'. Got {measure!r} instead.")
    per = np.where(np.isnan(proba), -np.inf, per)
    rows = per.max(axis=1) if per.size else np.zeros(0)
    rows = rows[np.isfinite(rows)]
    return round(float(rows.mean()), 6) if len(rows) else None
