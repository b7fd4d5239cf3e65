"""Every dashboard and rule query names only metrics convmon exports or recording rules define.

Metric names come from instantiating ``Metrics`` on a fresh registry (with the default metric
dimensions), expanded by type to what Prometheus stores (``_total``, ``_bucket``/``_sum``/``_count``,
``_info``); recording rules from ``deploy/prometheus/rules``. Labels in a selector on a raw metric
must be labels of that metric (plus ``instance``/``job``, added by the scrape).
"""

from __future__ import annotations

import json
import re
import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from monitor.contracts.metrics import Metrics
from monitor.contracts.metrics_anchors import AnchorMetrics
from monitor.contracts.metrics_review import ReviewMetrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import REPO_ROOT, Settings

GRAFANA = REPO_ROOT / "deploy" / "grafana"
RULES = sorted((REPO_ROOT / "deploy" / "prometheus" / "rules").glob("*.yml"))
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
BUILTIN = {"up": {"job", "instance"}, "ALERTS": {"alertname", "alertstate"}, "ALERTS_FOR_STATE": {"alertname"}}
SCRAPE_LABELS = {"instance", "job"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
            "unless", "inf", "nan"}
SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "info": ("_info",)}


def exported_metrics() -> dict[str, set[str]]:
    """Sample name -> label names, for everything Metrics and ``convmon anchors run``'s AnchorMetrics declare."""
    metrics = Metrics(CollectorRegistry(), dimensions=tuple(Settings().metric_dimensions))
    metrics.init_rubric(load_rubric_set("spur-copilot", REPO_ROOT / "prompts"))
    out: dict[str, set[str]] = {}
    review = ReviewMetrics(CollectorRegistry())  # `convmon ui`'s /metrics
    for collector in [*vars(metrics).values(), *vars(AnchorMetrics(CollectorRegistry())).values(),
                      *vars(review).values()]:
        if not isinstance(collector, MetricWrapperBase):
            continue
        labels = set(collector._labelnames) | SCRAPE_LABELS
        for suffix in SUFFIXES[collector._type]:
            out[collector._name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    for family in metrics.partition_families.values():  # the per-partition totals' custom collector
        out[family.name + "_total"] = {"partition", *family.labels} | SCRAPE_LABELS
    return out


def recording_rules() -> set[str]:
    return {r["record"] for p in RULES for g in yaml.safe_load(p.read_text())["groups"] for r in g["rules"]
            if "record" in r}


def selectors(expr: str) -> Iterator[tuple[str, set[str]]]:
    """(metric name, label names used in its matcher) for every series selector in a PromQL expression."""
    s = re.sub(r"\$\{[^}]*\}|\$\w+", "x", expr)  # Grafana variables
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', s)
    s = re.sub(r"\[[^\]]*\]", "", s)  # ranges, subqueries
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    for m in re.finditer(r"(?<![\w.:])([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{[^}]*\})?\s*(\()?", s):
        name, matcher, call = m.group(1), m.group(2), m.group(3)
        if call and not matcher or name in KEYWORDS:
            continue  # a function or aggregation, or a keyword
        yield name, set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matcher or ""))


def check(expr: str, known: dict[str, set[str]], records: set[str]) -> list[str]:
    problems = []
    for name, labels in selectors(expr):
        if name in records:
            continue
        if name not in known:
            problems.append(f"unknown metric {name!r}")
        elif labels - known[name]:
            problems.append(f"{name} has no label(s) {sorted(labels - known[name])}")
    return problems


def dashboard_queries(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            if "rawSql" in target:  # the drill-down table: run against PostgreSQL in tests/deploy/test_drill_down.py
                continue
            yield panel["title"], target["expr"]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            m = re.fullmatch(r"label_values\((.+),\s*\w+\)", var["definition"])
            assert m, var["definition"]
            yield f"variable {var['name']}", m.group(1)


@pytest.fixture(scope="module")
def known() -> dict[str, set[str]]:
    return {**exported_metrics(), **BUILTIN}


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_queries_use_only_exported_metrics_or_recording_rules(path: Path, known) -> None:
    board = json.loads(path.read_text())
    records = recording_rules()
    queries = list(dashboard_queries(board))
    assert len(queries) >= 8
    problems = [f"{title}: {p}" for title, expr in queries for p in check(expr, known, records)]
    assert problems == []


def test_rule_expressions_use_only_exported_metrics_or_recording_rules(known) -> None:
    records = recording_rules()
    problems = []
    for path in RULES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                name = rule.get("record") or rule["alert"]
                problems += [f"{name}: {p}" for p in check(rule["expr"], known, records)]
    assert problems == []


def test_checker_catches_unknown_metrics_and_labels(known) -> None:
    records = recording_rules()
    assert check('sum by (rubric) (rate(convmon_rubric_verdicts_total{verdict="yes"}[5m]))', known, records) == []
    assert check("rate(convmon_verdicts_total[5m])", known, records) == ["unknown metric 'convmon_verdicts_total'"]
    assert check('convmon_consumer_lag_messages{partition="1"}', known, records) == [
        "convmon_consumer_lag_messages has no label(s) ['partition']"]
    assert check("convmon_rubric_verdicts", known, records) == ["unknown metric 'convmon_rubric_verdicts'"]
    assert check('histogram_quantile(0.9, sum by (le) (rate(convmon_satisfaction_r_bucket{scorer="$s"}[5m])))',
                 known, records) == []
    assert check("a:b:c / on (x) group_left sum by (x) (convmon_events_total) > 1e3", known, records) == [
        "unknown metric 'a:b:c'"]


def test_dashboards_are_what_the_generator_writes() -> None:
    generator = runpy.run_path(str(GRAFANA / "generate.py"))
    rendered = generator["render"]()
    assert sorted(rendered) == sorted(p.name for p in DASHBOARDS)
    for path in DASHBOARDS:
        assert path.read_text() == rendered[path.name], f"run `python deploy/grafana/generate.py` ({path.name})"


def test_dashboards_are_distinct_and_use_the_datasource_variable() -> None:
    uids = set()
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        uids.add(board["uid"])
        for panel in board["panels"]:
            if panel["type"] != "row":
                expected = ({"type": "grafana-postgresql-datasource", "uid": "convmon-label-store"}
                            if "rawSql" in panel["targets"][0] else {"type": "prometheus", "uid": "${datasource}"})
                assert panel["datasource"] == expected, panel["title"]
    assert uids == {"convmon-overview", "convmon-item", "convmon-operations"}


def test_provisioning_points_at_the_dashboards_and_alertmanager() -> None:
    prov = GRAFANA / "provisioning"
    datasources = yaml.safe_load((prov / "datasources" / "convmon.yml").read_text())["datasources"]
    assert {d["uid"] for d in datasources} == {"convmon-prometheus", "convmon-alertmanager", "convmon-label-store"}
    prometheus = next(d for d in datasources if d["type"] == "prometheus")
    assert prometheus["jsonData"]["alertmanagerUid"] == "convmon-alertmanager"
    provider = yaml.safe_load((prov / "dashboards" / "convmon.yml").read_text())["providers"][0]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards/convmon"
    alerting = yaml.safe_load((prov / "alerting" / "convmon.yml").read_text())
    assert alerting["policies"][0]["receiver"] == alerting["contactPoints"][0]["name"]
