"""The judge as the worker wires it (monitor/runtime/wiring.py), for tests that hold one ``Settings``."""

from __future__ import annotations

from typing import Any

from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.settings import Settings
from monitor.judge.base import Judge
from monitor.judge.build import build_judge


def judge_from(settings: Settings, rubric: RubricSet, metrics: Metrics, **kw: Any) -> Judge:
    """``build_judge`` with the judge and rubric sections, the budget booked in the label store's database."""
    return build_judge(settings.judge, settings.rubrics, rubric, metrics, ledger_url=settings.label_store_url, **kw)
