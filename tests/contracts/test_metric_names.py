"""Metric names are a public contract (dashboards, alerts, recording rules): what ``Metrics``, ``RetrainMetrics``,
``AnchorMetrics`` and ``ReviewMetrics`` (``convmon ui``) declare (name, type, label names, help, buckets) must equal
tests/data/metric_names.json.

A change here is deliberate: add a metric, then regenerate the file with
``python tests/contracts/test_metric_names.py > tests/data/metric_names.json`` and review the diff (a renamed or
removed metric, or a changed label set, breaks every dashboard and rule that reads it).
"""

from __future__ import annotations

import json
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from monitor.contracts.metrics import Metrics, RetrainMetrics
from monitor.contracts.metrics_anchors import AnchorMetrics
from monitor.contracts.metrics_review import ReviewMetrics
from monitor.contracts.settings import REPO_ROOT, Settings

CONTRACT = REPO_ROOT / "tests" / "data" / "metric_names.json"


def declared() -> dict[str, list[dict[str, Any]]]:
    """Every metric declared, sorted by name, for the default dimensions and for ``convmon retrain``."""
    worker = Metrics(CollectorRegistry(), dimensions=tuple(Settings().metric_dimensions))
    out: dict[str, list[dict[str, Any]]] = {}
    holders = (("worker", worker), ("retrain", RetrainMetrics(CollectorRegistry())),
               ("anchors", AnchorMetrics(CollectorRegistry())), ("review", ReviewMetrics(CollectorRegistry())))
    for key, holder in holders:
        rows = [
            {"name": c._name, "type": c._type, "labels": list(c._labelnames), "help": c._documentation,
             "buckets": [str(b) for b in getattr(c, "_upper_bounds", [])]}
            for c in vars(holder).values() if isinstance(c, MetricWrapperBase)
        ]
        out[key] = sorted(rows, key=lambda row: row["name"])
    out["partition"] = sorted(({"name": f.name, "labels": ["partition", *f.labels], "help": f.documentation}
                               for f in worker.partition_families.values()), key=lambda row: row["name"])
    return out


def test_metric_names_labels_and_help_are_unchanged() -> None:
    expected = json.loads(CONTRACT.read_text())
    actual = declared()
    for key in expected:
        names = {row["name"] for row in expected[key]}
        got = {row["name"] for row in actual[key]}
        assert got == names, f"{key}: added {sorted(got - names)}, removed {sorted(names - got)}"
        assert actual[key] == expected[key]
    assert set(actual) == set(expected)


def test_each_metric_is_declared_once() -> None:
    names = [row["name"] for row in declared()["worker"]]
    assert len(names) == len(set(names)) > 60


if __name__ == "__main__":
    print(json.dumps(declared(), indent=1))
