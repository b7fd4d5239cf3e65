"""``bench detect``'s evaluation of the shipped ConvmonDsatSpike and ConvmonDsatSpikeCorrected rules, checked against
promtool itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bench.detect import DetectConfig, Pool, simulate
from bench.detect_estimators import estimate
from bench.detect_rule import RULES_DIR, SpikeRule, condition, episodes, firing, load_rule


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


def test_the_corrected_alert_must_share_the_constants_bench_detect_evaluates_it_with(tmp_path: Path) -> None:
    """The prediction-powered rows are ConvmonDsatSpikeCorrected: a shipped rule with other constants fails."""
    (tmp_path / "convmon-recording.yml").write_text((RULES_DIR / "convmon-recording.yml").read_text(encoding="utf-8"),
                                                    encoding="utf-8")
    alerts = (RULES_DIR / "convmon-alerts.yml").read_text(encoding="utf-8")
    changed = alerts.replace('zscore30m{polarity="dsat"} > 3', 'zscore30m{polarity="dsat"} > 4')
    assert changed != alerts
    (tmp_path / "convmon-alerts.yml").write_text(changed, encoding="utf-8")
    with pytest.raises(Exception, match="one set of constants"):
        load_rule(tmp_path)


@pytest.mark.parametrize("old, new", [
    ("residual_yes_total:max[30m]", "residual_yes_total:max[1h]"),
    ("distilled_probability:increase30m[7d:30m] offset 30m", "distilled_probability:increase30m[3d:30m] offset 30m"),
])
def test_every_range_of_the_corrected_rules_is_the_window_it_evaluates(tmp_path: Path, old: str, new: str) -> None:
    (tmp_path / "convmon-alerts.yml").write_text((RULES_DIR / "convmon-alerts.yml").read_text(encoding="utf-8"),
                                                 encoding="utf-8")
    recording = (RULES_DIR / "convmon-recording.yml").read_text(encoding="utf-8")
    assert old in recording
    (tmp_path / "convmon-recording.yml").write_text(recording.replace(old, new), encoding="utf-8")
    with pytest.raises(Exception, match="mixes windows"):
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


def _promtool_agrees(tmp_path: Path, counters: dict[str, np.ndarray], alert: str, fire: np.ndarray) -> None:
    """promtool's state of ``alert`` at every minute from 150 on, on counters (series -> per-minute cumulative
    values from minute 0), equals ``fire``."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool not found: install the Debian package `prometheus` (apt-get install prometheus)")
    lines = ["rule_files:", *[f"  - {RULES_DIR / n}" for n in ("convmon-recording.yml", "convmon-alerts.yml")],
             "evaluation_interval: 1m", "tests:", "  - interval: 1m", "    input_series:"]
    for series, values in counters.items():
        lines += [f"      - series: '{series}'", f"        values: '{' '.join(repr(float(v)) for v in values)}'"]
    lines.append("    promql_expr_test:")
    first = int(np.flatnonzero(fire)[0])
    compared = []
    for t in range(150, len(fire) + 1):  # eval time t minutes holds bins [0, t): our index t - 1
        if t - 1 > first and not fire[t - 1]:
            break  # once resolved, promtool's ALERTS keeps a stale sample for a while: compare up to there
        if fire[t - 1] != fire[t - 2]:
            # the alert group may read the recording groups' samples of this minute or of the one before (the
            # groups' order is not fixed; Prometheus runs them concurrently): a transition may come a minute late
            continue
        compared.append(int(fire[t - 1]))
        lines += [f"      - expr: count(ALERTS{{alertname=\"{alert}\",alertstate=\"firing\"}}) or vector(0)",
                  f"        eval_time: {t}m", "        exp_samples:", "          - labels: '{}'",
                  f"            value: {int(fire[t - 1])}"]
    assert 0 in compared and 1 in compared
    (tmp_path / "detect_test.yml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = subprocess.run([exe, "test", "rules", str(tmp_path / "detect_test.yml")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _cumulative(per_minute: np.ndarray) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(per_minute, dtype=np.float64)])


def test_agrees_with_promtool_minute_by_minute(tmp_path: Path) -> None:
    """A noisy judge slice with a 2x spike: the alert state at every minute, ours against promtool's."""
    rng = np.random.default_rng(7)
    total = rng.poisson(17, 300)
    share = np.where(np.arange(300) < 180, 0.1, 0.2)
    yes = rng.binomial(total, share)
    rule = load_rule()
    fire = firing(condition(yes.astype(float), total.astype(float), rule), rule)
    assert fire[180:].any() and not fire[:180].any()  # the case is worth checking: it pages, during the spike
    verdicts = 'convmon_rubric_verdicts_total{instance="w1",rubric="d",polarity="dsat",scorer="llm",verdict="%s"}'
    _promtool_agrees(tmp_path, {verdicts % "yes": _cumulative(yes), verdicts % "no": _cumulative(total - yes)},
                     "ConvmonDsatSpike", fire)


def test_the_prediction_powered_rows_agree_with_the_shipped_corrected_alert(tmp_path: Path) -> None:
    """bench detect's ``ppi`` estimator on a stream it simulates (a distilled model that discriminates, a 5 % judged
    slice, a 2x spike at minute 180) against promtool running ConvmonDsatSpikeCorrected on the partition totals the
    workers would export for the same conversations: the same state at every minute."""
    rng = np.random.default_rng(11)
    dsat = rng.random(4000) < 0.3
    proba = np.where(dsat, rng.beta(5, 3, 4000), rng.beta(1, 8, 4000))
    pool = Pool(dsat, proba, proba >= 0.5)
    rate = 0.05
    config = DetectConfig(volume_per_hour=6000)
    stats = simulate(np.where(np.arange(300) < 180, 0.1, 0.2), pool, rate, config, rng)
    rule = load_rule()
    fire = firing(estimate(stats, rule, rate)[1]["ppi"].condition, rule)
    assert fire[180:].any() and not fire[:180].any()
    w = 1 / rate
    q = w * (w - 1)
    judged_f = stats["Y"] - stats["R"]  # R sums y - f over the judged conversations
    per_minute = {"residual_weight": w * stats["n"], "residual_yes": w * stats["Y"],
                  "residual_probability": w * judged_f, "residual_design_weight": q * stats["n"],
                  "residual_design_yes": q * stats["Y"], "residual_design_probability": q * judged_f,
                  "residual_design_squares": q * stats["R2"]}
    labels = 'instance="w1",partition="0",rubric="d",polarity="dsat"'
    counters = {f"convmon_partition_rubric_{term}_total{{{labels}}}": _cumulative(v) for term, v in per_minute.items()}
    counters[f'convmon_partition_rubric_probability_sum_total{{{labels},scorer="distilled"}}'] = _cumulative(stats["F"])
    verdicts = f'convmon_partition_rubric_verdicts_total{{{labels},scorer="distilled",verdict="%s"}}'
    counters[verdicts % "yes"] = _cumulative(stats["V"])
    counters[verdicts % "no"] = _cumulative(stats["N"] - stats["V"])
    _promtool_agrees(tmp_path, counters, "ConvmonDsatSpikeCorrected", fire)
