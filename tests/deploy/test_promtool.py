"""Prometheus config, recording and alert rules checked and unit-tested by promtool.

promtool comes with the Debian package ``prometheus``; a missing promtool is a failure, not a
skip, because these rules are what pages the on-call engineer.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.promtool import PROMETHEUS_DIR, promtool

RULE_FILES = sorted((PROMETHEUS_DIR / "rules").glob("*.yml"))
RULE_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*_test.yml"))


def test_rule_files_and_tests_exist() -> None:
    assert {p.name for p in RULE_FILES} == {"convmon-recording.yml", "convmon-alerts.yml"}
    assert len(RULE_TESTS) >= 3


def test_rules_are_valid() -> None:
    result = promtool("check", "rules", *RULE_FILES)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("config", ["prometheus.yml", "prometheus-k8s.yml"])
def test_scrape_config_is_valid(config: str) -> None:
    result = promtool("check", "config", PROMETHEUS_DIR / config)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("test_file", RULE_TESTS, ids=lambda p: p.name)
def test_rule_unit_tests_pass(test_file: Path) -> None:
    result = promtool("test", "rules", test_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_unit_tested_and_has_for_severity_and_summary() -> None:
    alerts = [
        rule
        for path in RULE_FILES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]
    tested = {
        case["alertname"]
        for path in RULE_TESTS
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")  # tested firing, not only silent
    }
    for rule in alerts:
        assert rule["alert"] in tested, f"{rule['alert']} has no promtool test that makes it fire"
        assert rule.get("for"), f"{rule['alert']} has no `for:` clause"
        assert rule["labels"]["severity"] in {"page", "ticket"}
        assert rule["annotations"]["summary"]


def test_a_broken_rule_file_is_reported() -> None:
    """The check can fail: promtool rejects an invalid expression."""
    bad = PROMETHEUS_DIR / "tests" / ".broken-rules.yml"
    bad.write_text("groups:\n  - name: x\n    rules:\n      - record: a:b:c\n        expr: sum(rate(x[5m])\n")
    try:
        assert promtool("check", "rules", bad).returncode != 0
    finally:
        bad.unlink()


def test_alertmanager_config_is_valid_and_routes_pages_apart() -> None:
    exe = shutil.which("amtool")
    if exe is None:
        pytest.fail("amtool not found: install the Debian package `prometheus-alertmanager`")
    config = PROMETHEUS_DIR / "alertmanager.yml"
    result = subprocess.run([exe, "check-config", str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    routed = subprocess.run([exe, "config", "routes", "test", f"--config.file={config}", "severity=page",
                             "alertname=ConvmonDsatSpike"], capture_output=True, text=True, timeout=60)
    assert routed.stdout.strip() == "convmon-oncall", routed.stdout + routed.stderr
    routed = subprocess.run([exe, "config", "routes", "test", f"--config.file={config}", "severity=ticket"],
                            capture_output=True, text=True, timeout=60)
    assert routed.stdout.strip() == "convmon-tickets", routed.stdout + routed.stderr
