"""JSON that every parser reads: ``--json`` outputs and written manifests are public contracts, and bare
``NaN`` / ``Infinity`` are not JSON (``jq`` and strict parsers reject them)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def strict_json(value: Any) -> Any:
    """``value`` with every NaN / infinity as None: an undefined metric (Pearson of a constant, ROC-AUC of
    one class) is ``null``; numpy scalars become Python numbers."""
    if isinstance(value, Mapping):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """Strict JSON text of ``value`` (see :func:`strict_json`)."""
    return json.dumps(strict_json(value), indent=indent, allow_nan=False)
