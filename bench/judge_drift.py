"""``convmon bench drift``: is it the judge or the product? Three detectors on simulated streams.

Per seed, a rubric of ``items`` items (the first is the one that changes) and a judge that flips
``judge_noise`` of its verdicts at random on every call. Three scenarios over ``days`` simulated days:

- ``judge_change``: at a random hour the judge starts answering ``change_flip`` of the first item's
  conversations the other way (``systematic``: the same conversations every call, as a new model or prompt
  would; ``random``: fresh ones each call);
- ``product_spike``: the first item's true DSAT share doubles for ``spike_hours`` (the judge is unchanged);
- ``quiet``: neither.

Detectors: the anchors (``anchors`` human-labelled conversations re-judged once a day, the two e-processes of
:mod:`monitor.drift.anchor_drift` at ``alpha`` over the rubric); the rolling z-test on the judged slice's raw
hourly rate (|z| > ``z`` against the trailing 7 days); today's judge-vs-distilled agreement
(:class:`monitor.drift.agreement.Agreement`, default thresholds) on the same judged slice, read hourly. The
"page" in the spike scenario is the z-test's first upward alarm on the item (its end when it never fires);
a detector blames the judge when its alarm is on at the page.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from monitor.drift.agreement import Agreement
from monitor.drift.anchor_drift import evaluate_item

PREVALENCE = (0.10, 0.03, 0.05, 0.08, 0.12, 0.15, 0.20, 0.25, 0.30, 0.06)  # per item; the first one changes
SCENARIOS = ("judge_change", "product_spike", "quiet")
METHODS = ("anchors", "ztest", "agreement")


@dataclass(frozen=True)
class DriftConfig:
    seeds: list[int] = field(default_factory=lambda: list(range(10)))
    days: int = 70
    anchors: int = 200
    items: int = 10
    judge_noise: float = 0.05
    change_flip: float = 0.15
    change_kind: str = "systematic"
    spike_factor: float = 2.0
    spike_hours: int = 2
    volume_per_hour: int = 5000
    judge_rate: float = 0.1
    alpha: float = 0.01
    z: float = 3.0
    z_baseline_hours: int = 168
    checks_per_day: int = 24  # provenance probes of the anchors' owner (one call each)


def _anchor_alarms(cfg: DriftConfig, rng: np.random.Generator, change_h: float | None) -> np.ndarray:
    """Hour at which each item's anchor test first fires (inf: never); runs at the start of each day."""
    prev = np.array(PREVALENCE[: cfg.items])[:, None]
    human = rng.uniform(size=(cfg.items, cfg.anchors)) < prev
    fixed = rng.uniform(size=cfg.anchors) < cfg.change_flip
    runs = np.empty((cfg.days, cfg.items, cfg.anchors))
    for d in range(cfg.days):
        v = human ^ (rng.uniform(size=human.shape) < cfg.judge_noise)
        if change_h is not None and d * 24 >= change_h:
            flip = fixed if cfg.change_kind == "systematic" else rng.uniform(size=cfg.anchors) < cfg.change_flip
            v[0] ^= flip
        runs[d] = v
    theta = rng.uniform(size=(cfg.days, cfg.anchors))
    out = np.full(cfg.items, np.inf)
    for k in range(cfg.items):
        drift = evaluate_item(runs[:, k, :], human[k].astype(float), theta, alpha=cfg.alpha / cfg.items)
        if drift.detected_run is not None:
            out[k] = drift.detected_run * 24.0
    return out


def _stream(cfg: DriftConfig, rng: np.random.Generator, change_h: float | None, spike_h: float | None,
            items: list[int]) -> tuple[np.ndarray, np.ndarray, dict[int, list[tuple[np.ndarray, np.ndarray]]]]:
    """Per hour and item: judged count and judge-yes count; per item and hour the (verdict, distilled p) pairs."""
    hours = cfg.days * 24
    n = round(cfg.volume_per_hour * cfg.judge_rate)
    yes = np.zeros((hours, cfg.items))
    pairs: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {k: [] for k in items}
    for h in range(hours):
        for k in range(cfg.items):
            share = PREVALENCE[k]
            if k == 0 and spike_h is not None and spike_h <= h < spike_h + cfg.spike_hours:
                share = min(1.0, share * cfg.spike_factor)
            truth = rng.uniform(size=n) < share
            verdict = truth ^ (rng.uniform(size=n) < cfg.judge_noise)
            if k == 0 and change_h is not None and h >= change_h:
                verdict ^= rng.uniform(size=n) < cfg.change_flip
            yes[h, k] = verdict.sum()
            if k in pairs:  # a distilled model that tracks the truth (AUC about 0.97), as the workers' shadow slice
                prob = np.clip(0.55 * truth + 0.2 + rng.normal(0, 0.18, size=n), 0, 1)
                pairs[k].append((verdict, prob))
    return np.full((hours, cfg.items), float(n)), yes, pairs


def _ztest_alarms(cfg: DriftConfig, judged: np.ndarray, yes: np.ndarray, *, upward: bool = False) -> np.ndarray:
    """Hours (hours x items, bool) at which the rolling z-test fires: the hour's rate against the trailing week."""
    cum_n = np.vstack([np.zeros(judged.shape[1]), np.cumsum(judged, axis=0)])
    cum_y = np.vstack([np.zeros(yes.shape[1]), np.cumsum(yes, axis=0)])
    hours = judged.shape[0]
    out = np.zeros_like(judged, dtype=bool)
    for h in range(24, hours):
        lo = max(0, h - cfg.z_baseline_hours)
        nb, yb = cum_n[h] - cum_n[lo], cum_y[h] - cum_y[lo]
        pb = yb / nb
        pw = yes[h] / judged[h]
        se = np.sqrt(np.clip(pb * (1 - pb), 1e-12, None) * (1 / judged[h] + 1 / nb))
        z = (pw - pb) / se
        out[h] = z > cfg.z if upward else np.abs(z) > cfg.z
    return out


def _agreement_alarms(cfg: DriftConfig, pairs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per hour: whether today's agreement detector reports drift after that hour's pairs."""
    detector = Agreement()
    out = np.zeros(len(pairs), dtype=bool)
    for h, (verdicts, probs) in enumerate(pairs):
        for v, p in zip(verdicts.tolist(), probs.tolist(), strict=True):
            detector.update((v, p))
        out[h] = detector.drift_detected
    return out


def _first(hours: np.ndarray, start: float) -> float:
    after = np.flatnonzero(hours)
    after = after[after >= start]
    return float(after[0]) if after.size else math.inf


def run_seed(cfg: DriftConfig, seed: int, scenario: str) -> dict[str, Any]:
    """One seed of one scenario: when each method first fires, and on what."""
    rng = np.random.default_rng([seed, SCENARIOS.index(scenario)])
    hours = cfg.days * 24
    at = float(rng.integers(7 * 24, hours - 7 * 24))
    change_h = at if scenario == "judge_change" else None
    spike_h = at if scenario == "product_spike" else None
    anchors = _anchor_alarms(cfg, rng, change_h)
    agreement_items = list(range(cfg.items)) if scenario == "quiet" else [0]
    judged, yes, pairs = _stream(cfg, rng, change_h, spike_h, agreement_items)
    ztest = _ztest_alarms(cfg, judged, yes)
    agreement = {k: _agreement_alarms(cfg, pairs[k]) for k in agreement_items}
    start = at if scenario != "quiet" else 0.0
    row: dict[str, Any] = {"seed": seed, "scenario": scenario, "at_hour": at if scenario != "quiet" else None}
    # false alarms: any firing before the event, or on an item the event did not touch
    row["false_alarm"] = {
        "anchors": bool(np.any(anchors < start) or np.any(np.isfinite(anchors[1:]))),
        "ztest": bool(ztest[: int(start)].any() or ztest[:, 1:].any()),
        "agreement": bool(any(a[: int(start)].any() for a in agreement.values())
                          or any(a.any() for k, a in agreement.items() if k != 0)),
    }
    first = {"anchors": float(anchors[0]) if anchors[0] >= start else math.inf,
             "ztest": _first(ztest[:, 0], start), "agreement": _first(agreement[0], start)}
    if scenario == "judge_change":
        row["detected_hours"] = {m: (t - at if math.isfinite(t) else None) for m, t in first.items()}
    if scenario == "product_spike":
        page = _first(_ztest_alarms(cfg, judged, yes, upward=True)[:, 0], at)
        paged = page < at + cfg.spike_hours + 1
        when = page if paged else at + cfg.spike_hours
        row["paged"] = bool(paged)
        row["blamed_on_judge"] = {
            "anchors": bool(anchors[0] <= when),
            "ztest": bool(ztest[int(at): int(when) + 1, 0].any()),  # its alarm cannot say which side moved
            "agreement": bool(agreement[0][int(when)]),
        }
    return row


def _summary(cfg: DriftConfig, rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {s: [r for r in rows if r["scenario"] == s] for s in SCENARIOS}
    n = len(cfg.seeds)
    live_calls = cfg.days * 24 * round(cfg.volume_per_hour * cfg.judge_rate)
    anchor_calls = cfg.days * cfg.anchors + cfg.days * cfg.checks_per_day
    out: dict[str, Any] = {}
    for m in METHODS:
        times = [r["detected_hours"][m] for r in by["judge_change"] if r["detected_hours"][m] is not None]
        out[m] = {
            "judge_change_detected": sum(1 for r in by["judge_change"] if r["detected_hours"][m] is not None),
            "judge_change_hours_median": float(np.median(times)) if times else None,
            "judge_change_hours_max": max(times) if times else None,
            "judge_change_false_alarms": sum(r["false_alarm"][m] for r in by["judge_change"]),
            "spike_blamed_on_judge": sum(r["blamed_on_judge"][m] for r in by["product_spike"]),
            "spike_false_alarms": sum(r["false_alarm"][m] for r in by["product_spike"]),
            "quiet_false_alarms": sum(r["false_alarm"][m] for r in by["quiet"]),
            "seeds": n,
            "extra_judge_calls_per_seed": anchor_calls if m == "anchors" else 0,
        }
    anchors = out["anchors"]
    bars = {"judge_change_detected_ge_9_of_10": anchors["judge_change_detected"] >= math.ceil(0.9 * n),
            "spike_blamed_le_1_of_10": anchors["spike_blamed_on_judge"] <= n // 10,
            "quiet_no_false_alarm": anchors["quiet_false_alarms"] == 0}
    return {"methods": out, "bars": bars, "bars_met": all(bars.values()),
            "spike_paged": sum(r["paged"] for r in by["product_spike"]),
            "cost": {"live_judged_calls_per_seed": live_calls, "anchor_calls_per_seed": anchor_calls,
                     "anchor_share_of_live_slice": round(anchor_calls / live_calls, 4)}}


def run_drift(cfg: DriftConfig, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    rows = []
    for scenario in SCENARIOS:
        for seed in cfg.seeds:
            rows.append(run_seed(cfg, seed, scenario))
            if progress is not None:
                progress(f"{scenario} seed {seed}")
    return {"config": asdict(cfg), **_summary(cfg, rows), "runs": rows}
