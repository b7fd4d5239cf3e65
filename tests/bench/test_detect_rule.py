"""``bench detect``'s evaluation of the shipped ConvmonDsatSpike rule, checked against promtool itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from monitor.tools.bench.detect_rule import RULES_DIR, SpikeRule, condition, episodes, firing, load_rule


def test_the_rule_is_read_from_the_shipped_files() -> None:
    assert load_rule() == SpikeRule(ratio=1.5, min_difference=0.02, min_z=3.0, min_count=100.0, for_minutes=15,
                                    window=30, baseline=7 * 24 * 60, baseline_step=30, baseline_offset=30)


def test_a_rule_of_another_shape_fails_loudly(tmp_path: Path) -> None:
    for name in ("convmon-alerts.yml", "convmon-recording.yml"):
        text = (RULES_DIR / name).read_text(encoding="utf-8")
        (tmp_path / name).write_text(text.replace("zscore30m{polarity=\"dsat\", scorer=\"llm\"} > 3", "zscore1h{} > 3"),
                                     encoding="utf-8")
    with pytest.raises(Exception, match="no longer has the shape"):
        load_rule(tmp_path)


def _constant(per_minute: list[tuple[int, float, float]]) -> tuple[np.ndarray, np.ndarray]:
    yes = np.concatenate([np.full(m, y) for m, y, _ in per_minute])
    total = np.concatenate([np.full(m, t) for m, _, t in per_minute])
    return yes, total


def test_the_shipped_unit_tests_cases() -> None:
    """deploy/prometheus/tests/satisfaction_test.yml's cases, as per-minute counts."""
    rule = load_rule()
    fire = firing(condition(*_constant([(180, 5, 50), (120, 15, 50)]), rule), rule)
    assert not fire[174] and not fire[194] and fire[214]  # eval times 175m, 195m, 215m
    assert len(episodes(fire)) == 1
    low_volume = firing(condition(*_constant([(180, 0.1, 1), (120, 0.5, 1)]), rule), rule)
    assert not low_volume.any()
    under_3_se = firing(condition(*_constant([(180, 0.4, 4), (120, 0.72, 4)]), rule), rule)
    assert not under_3_se[239]


def test_for_15m_needs_16_consecutive_true_evaluations() -> None:
    rule = load_rule()
    cond = np.zeros(60, dtype=bool)
    cond[10:26] = True  # 16 evaluations: fires at the last
    cond[30:45] = True  # 15: pending only
    fire = firing(cond, rule)
    assert list(np.flatnonzero(fire)) == [25]


def test_agrees_with_promtool_minute_by_minute(tmp_path: Path) -> None:
    """A noisy judge slice with a 2x spike: the alert state at every minute, ours against promtool's."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool not found: install the Debian package `prometheus` (apt-get install prometheus)")
    rng = np.random.default_rng(7)
    total = rng.poisson(17, 300)
    share = np.where(np.arange(300) < 180, 0.1, 0.2)
    yes = rng.binomial(total, share)
    rule = load_rule()
    fire = firing(condition(yes.astype(float), total.astype(float), rule), rule)
    assert fire[180:].any() and not fire[:180].any()  # the case is worth checking: it pages, during the spike
    counters = {"yes": np.concatenate([[0], np.cumsum(yes)]), "no": np.concatenate([[0], np.cumsum(total - yes)])}
    lines = ["rule_files:", *[f"  - {RULES_DIR / n}" for n in ("convmon-recording.yml", "convmon-alerts.yml")],
             "evaluation_interval: 1m", "tests:", "  - interval: 1m", "    input_series:"]
    for verdict, values in counters.items():
        lines += [f"      - series: 'convmon_rubric_verdicts_total{{instance=\"w1\",rubric=\"d\",polarity=\"dsat\","
                  f"scorer=\"llm\",verdict=\"{verdict}\"}}'", f"        values: '{' '.join(map(str, values))}'"]
    lines.append("    promql_expr_test:")
    first = int(np.flatnonzero(fire)[0])
    compared = []
    for t in range(150, 300):  # eval time t minutes holds bins [0, t): our index t - 1
        if t - 1 > first and not fire[t - 1]:
            break  # once resolved, promtool's ALERTS keeps a stale sample for a while: compare up to there
        if fire[t - 1] != fire[t - 2]:
            # the alert group may read the recording groups' samples of this minute or of the one before (the
            # groups' order is not fixed; Prometheus runs them concurrently): a transition may come a minute late
            continue
        compared.append(int(fire[t - 1]))
        lines += ["      - expr: count(ALERTS{alertname=\"ConvmonDsatSpike\",alertstate=\"firing\"}) or vector(0)",
                  f"        eval_time: {t}m", "        exp_samples:", "          - labels: '{}'",
                  f"            value: {int(fire[t - 1])}"]
    assert 0 in compared and 1 in compared
    (tmp_path / "detect_test.yml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = subprocess.run([exe, "test", "rules", str(tmp_path / "detect_test.yml")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
