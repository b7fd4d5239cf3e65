"""`convmon bench drift` on a small configuration: every method and scenario reported, costs counted."""

from __future__ import annotations

from bench.judge_drift import METHODS, SCENARIOS, DriftConfig, run_drift


def test_small_run_reports_every_method_and_scenario() -> None:
    cfg = DriftConfig(seeds=[0, 1], days=20, anchors=120, items=3, volume_per_hour=1000, change_flip=0.3)
    result = run_drift(cfg)
    assert {r["scenario"] for r in result["runs"]} == set(SCENARIOS) and len(result["runs"]) == 6
    assert set(result["methods"]) == set(METHODS)
    anchors = result["methods"]["anchors"]
    assert anchors["judge_change_detected"] == 2 and anchors["quiet_false_alarms"] == 0  # a large change
    assert anchors["spike_blamed_on_judge"] == 0
    assert anchors["extra_judge_calls_per_seed"] == 20 * 120 + 20 * 24
    assert result["cost"]["live_judged_calls_per_seed"] == 20 * 24 * 100
    assert set(result["bars"]) == {"judge_change_detected_ge_9_of_10", "spike_blamed_le_1_of_10",
                                   "quiet_no_false_alarm"}
