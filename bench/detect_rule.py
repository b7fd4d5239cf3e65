"""The shipped ``ConvmonDsatSpike`` alert, evaluated over per-minute counts instead of Prometheus.

The thresholds are read from the shipped rule files (``deploy/prometheus/rules``), so the benchmark
follows the rule when it changes, and a rule whose shape no longer matches fails loudly. What is
evaluated, once per simulated minute t (evaluation interval 1m, as deployed), for one series:

* window: the conversations of the last ``window`` minutes, bins [t - 30, t) (``ratio_rate30m``,
  ``increase30m``). Counts are exact: Prometheus extrapolates ``increase()`` to the window edges,
  which scales numerator and denominator alike (so the ratio is unchanged) and moves the count guard
  by under one scrape interval's conversations; that is not modelled;
* baseline: ``sum_over_time(increase30m[7d:30m] offset 30m)``: the subquery's steps are aligned to
  multiples of 30 minutes, so the baseline is the bins [E - 7d, E) with E = the last multiple of 30
  minutes at or before t - 30 (``count7d``; missing history simply gives a smaller count);
* the expression: ``p_w > 1.5 p_b and p_w - p_b > 0.02 and z > 3 and n_w >= 100``, z the pooled
  two-proportion z (its clamp_min 0.0001 included); a ratio of 0/0 is no sample, so the expression is
  false there (as PromQL's empty result);
* ``for: 15m``: the alert becomes pending at the first true evaluation and fires at the evaluation
  15 minutes later if every evaluation in between was true (Prometheus' ``ts - activeAt >= for``).

The alert reads the recordings of the same minute. Prometheus runs the alert group and the recording
groups independently, so the alert may read recordings one evaluation old: a real page can come up to a
minute later than counted here (``tests/bench/test_detect_rule.py`` checks every other minute against
promtool).

An estimator that is not a proportion of counted verdicts (the prediction-powered rate) brings its own
standard error: its z is (p_w - p_b) / sqrt(se_w^2 + se_b^2) (:func:`condition_with_se`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from monitor.contracts.errors import ConfigError
from monitor.contracts.setting_values import REPO_ROOT

RULES_DIR = REPO_ROOT / "deploy" / "prometheus" / "rules"
ALERT = "ConvmonDsatSpike"
CORRECTED = "ConvmonDsatSpikeCorrected"  # the same test on the corrected rate
CORRECTED_GROUP = "convmon-corrected-rates"  # the recording rules it reads


@dataclass(frozen=True)
class SpikeRule:
    """The alert's constants; minutes throughout."""

    ratio: float = 1.5
    min_difference: float = 0.02
    min_z: float = 3.0
    min_count: float = 100.0
    for_minutes: int = 15
    window: int = 30
    baseline: int = 7 * 24 * 60
    baseline_step: int = 30
    baseline_offset: int = 30
    min_judged: float = 30.0  # ConvmonDsatSpikeCorrected's second guard: judged conversations (effective) in the window


_DURATION = {"m": 1, "h": 60, "d": 24 * 60}


def _minutes(text: str) -> int:
    return int(text[:-1]) * _DURATION[text[-1]]


def _find(pattern: str, text: str, alert: str, what: str) -> re.Match[str]:
    found = re.search(pattern, text)
    if found is None:
        raise ConfigError(f"bench detect: the shipped {alert} rule no longer has the shape it evaluates ({what}); "
                          f"update bench/detect_rule.py with the rule")
    return found


def load_rule(rules_dir: Path = RULES_DIR) -> SpikeRule:
    """The constants of the shipped alert and of the recording rules it reads; ``ConvmonDsatSpikeCorrected``
    (the prediction-powered rows) must have the same, since one rule evaluates both."""
    alerts = yaml.safe_load((rules_dir / "convmon-alerts.yml").read_text(encoding="utf-8"))
    text = (rules_dir / "convmon-recording.yml").read_text(encoding="utf-8")
    recording = " ".join(text.split())
    judge = _constants(alerts, recording, rules_dir, ALERT, r'\{polarity="dsat", scorer="llm"\}',
                       r'verdicts:increase30m\{polarity="dsat", scorer="llm"\}', "verdicts", "verdicts:rate30m")
    corrected = _constants(alerts, recording, rules_dir, CORRECTED, r'\{polarity="dsat"\}',
                           r'distilled_scored:increase30m\{polarity="dsat"\}', "residual_weight",
                           "residual_weight:increase30m")
    judged = float(_find(r'effective_count30m\{polarity="dsat"\} >= ([0-9]*\.?[0-9]+)',
                         _alert_expr(alerts, rules_dir, CORRECTED)[0], CORRECTED, "the judged guard").group(1))
    if corrected != judge:
        raise ConfigError(f"bench detect evaluates {ALERT} and {CORRECTED} with one set of constants, and the shipped "
                          f"rules differ: {judge} and {corrected}; update bench/detect_rule.py")
    _same_ranges(yaml.safe_load(text)["groups"], rules_dir, CORRECTED_GROUP, corrected)
    return replace(judge, min_judged=judged)


def _alert_expr(alerts: Any, rules_dir: Path, alert: str) -> tuple[str, str]:
    """The shipped ``alert``'s expression on one line, and its ``for``."""
    rules = [r for g in alerts["groups"] for r in g["rules"] if r.get("alert") == alert]
    if len(rules) != 1:
        raise ConfigError(f"bench detect: expected one {alert} rule in {rules_dir}, found {len(rules)}")
    return " ".join(rules[0]["expr"].split()), str(rules[0]["for"])


def _same_ranges(groups: Any, rules_dir: Path, group: str, rule: SpikeRule) -> None:
    """Every range and baseline subquery of the recording ``group`` is the alert's window and baseline (the
    constants above are read from one of its rules)."""
    text = " ".join(" ".join(r["expr"].split()) for g in groups if g["name"] == group for r in g["rules"])
    if not text:
        raise ConfigError(f"bench detect: no recording group {group} in {rules_dir}")
    ranges = {_minutes(m) for m in re.findall(r"\[(\d+[mhd])\]", text)}
    baselines = {(_minutes(a), _minutes(b), _minutes(c)) for a, b, c in
                 re.findall(r"\[(\d+[mhd]):(\d+[mhd])\] offset (\d+[mhd])", text)}
    if ranges != {rule.window} or baselines != {(rule.baseline, rule.baseline_step, rule.baseline_offset)}:
        raise ConfigError(f"bench detect: the recording group {group} mixes windows {sorted(ranges)} or baselines "
                          f"{sorted(baselines)}; it evaluates one window of {rule.window} minutes and one baseline")


def _constants(alerts: Any, recording: str, rules_dir: Path, alert: str, series: str, volume: str,
               counted: str, window_rule: str) -> SpikeRule:
    """One alert's constants: ``series`` selects its rate, baseline and z, ``volume`` its guard; ``counted`` names
    the recorded counts whose baseline tiling it reads, ``window_rule`` the recording whose range is its window."""
    expr, for_ = _alert_expr(alerts, rules_dir, alert)
    num = r"([0-9]*\.?[0-9]+)"
    window = _find(rf"record: rubric:convmon_rubric_{window_rule} expr: .*?\[(\d+[mh])\]", recording, alert,
                   "the 30-minute window")
    base = _find(rf"{counted}:increase30m\[(\d+[dh]):(\d+m)\] offset (\d+m)", recording, alert, "count7d")
    return SpikeRule(
        ratio=float(_find(r"ratio_rate30m" + series + r" > " + num + r" \*", expr, alert, "ratio").group(1)),
        min_difference=float(_find(r"ratio_baseline7d" + series + r" > " + num, expr, alert, "difference").group(1)),
        min_z=float(_find(r"zscore30m" + series + r" > " + num, expr, alert, "z").group(1)),
        min_count=float(_find(volume + r" >= " + num, expr, alert, "volume").group(1)),
        for_minutes=_minutes(for_),
        window=_minutes(window.group(1)),
        baseline=_minutes(base.group(1)), baseline_step=_minutes(base.group(2)),
        baseline_offset=_minutes(base.group(3)))


def window_sums(per_minute: np.ndarray, rule: SpikeRule) -> tuple[np.ndarray, np.ndarray]:
    """(window, baseline) sums of a per-minute array at each evaluation t = 1..M (index t - 1)."""
    cs = np.concatenate([[0.0], np.cumsum(per_minute, dtype=np.float64)])
    t = np.arange(1, len(per_minute) + 1)
    window = cs[t] - cs[np.maximum(t - rule.window, 0)]
    end = np.maximum((t - rule.baseline_offset) // rule.baseline_step * rule.baseline_step, 0)
    baseline = cs[end] - cs[np.maximum(end - rule.baseline, 0)]
    return window, baseline


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.divide(a, b, out=np.full(np.shape(a), np.nan), where=np.asarray(b) > 0), dtype=float)


def condition(yes: np.ndarray, total: np.ndarray, rule: SpikeRule) -> np.ndarray:
    """The alert expression at each minute, from per-minute yes and total counts (weights allowed)."""
    yes_w, yes_b = window_sums(yes, rule)
    n_w, n_b = window_sums(total, rule)
    p_w, p_b = _div(yes_w, n_w), _div(yes_b, n_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = _div(p_w * n_w + p_b * n_b, n_w + n_b)
        z = (p_w - p_b) / np.sqrt(np.maximum(pooled * (1 - pooled), 0.0001) * (1 / n_w + 1 / n_b))
        return np.asarray((p_w > rule.ratio * p_b) & (p_w - p_b > rule.min_difference) & (z > rule.min_z)
                          & (n_w >= rule.min_count), dtype=bool)


def condition_with_se(p_w: np.ndarray, se_w: np.ndarray, p_b: np.ndarray, se_b: np.ndarray, n_w: np.ndarray,
                      judged_w: np.ndarray, rule: SpikeRule) -> np.ndarray:
    """The same expression for an estimator with its own standard errors (NaN compares false), with the corrected
    alert's guard on the judged conversations in the window (``judged_w``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (p_w - p_b) / np.sqrt(se_w**2 + se_b**2)
        return np.asarray((p_w > rule.ratio * p_b) & (p_w - p_b > rule.min_difference) & (z > rule.min_z)
                          & (n_w >= rule.min_count) & (judged_w >= rule.min_judged), dtype=bool)


def firing(cond: np.ndarray, rule: SpikeRule) -> np.ndarray:
    """Whether the alert fires at each evaluation: true at this one and the ``for`` minutes before it."""
    run = np.zeros(len(cond), dtype=np.int64)
    streak = 0
    for i, c in enumerate(cond):
        streak = streak + 1 if c else 0
        run[i] = streak
    return run > rule.for_minutes


def episodes(fire: np.ndarray) -> np.ndarray:
    """Indices where the alert starts firing (each a page)."""
    fire = np.asarray(fire, dtype=bool)
    return np.flatnonzero(fire & ~np.concatenate([[False], fire[:-1]]))
