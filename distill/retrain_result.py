"""What one retraining round did; its own module so the report can render it without importing retrain."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from distill.promotion import Evaluation, GateDecision

Status = Literal["promoted", "rejected", "skipped"]


@dataclass
class RetrainResult:
    """``promoted``: new version is live; ``rejected``: published, gate failed; ``skipped``: nothing trained."""

    status: Status
    reasons: list[str]
    n_labels: int
    version: str | None = None
    live_version: str | None = None  # the live version the candidate was compared with
    item_status: dict[str, str] = field(default_factory=dict)
    evaluation: Evaluation | None = None
    live_evaluation: Evaluation | None = None
    gate: GateDecision | None = None
    report: Path | None = None
    purged: int = 0  # labels deleted by the retention policy before training
