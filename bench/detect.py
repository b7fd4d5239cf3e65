"""``bench detect``: does the shipped DSAT-spike alert see a spike, on which rate, at equal judge spend?

Traffic: USS dialogues (shared/data/uss, whole conversations, as a worker receives them) replayed at
``volume_per_hour`` conversations an hour in simulated minutes (Poisson arrivals; nothing sleeps).
Each conversation is drawn from the replay split, DSAT (``label``: the dialogue label of
shared/data/README, or ``overall``: the dialogue-level OVERALL rating below neutral) with probability
``base_share``, or ``factor`` times that inside the spike window, so only the DSAT share moves. Per seed
the dialogues are split in two by dialogue: a training split and a disjoint replay split.

The distilled model is the served recipe (:func:`distill.train.train_items`, as ``convmon distill
train`` builds it: the ``featurizer`` spec, hashing by default, one calibrated LR for the item) trained
on what the judge slice of ``train_hours`` of baseline traffic would have labelled (distinct
training-split dialogues at the baseline share, at most ``max_training_labels`` and as many as the split
holds at that share). The
judge is an oracle: the human dialogue label, flipped with probability ``judge_noise`` per judgment (0 by
default). Every estimator uses the same
judged slice (a uniform ``rate`` of the traffic): equal judge spend.

Per estimator (:mod:`bench.detect_estimators`) and judge rate: false alarms per day of
the shipped rule (:mod:`bench.detect_rule`) on ``quiet_days`` of traffic without a spike;
time to detect a 2x / 3x spike of ``spike_minutes`` starting after ``history_hours`` of baseline (the
first firing evaluation from the spike's start until the last 30-minute window that holds spike traffic;
later: not detected); the 30-minute rate's
error against the rate judging all traffic would export (mean absolute, in points; coverage of the
95 % interval where the estimator has one). Median and range over seeds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupShuffleSplit

from bench.detect_estimators import ESTIMATORS, STATS, Z95, Series, estimate
from bench.detect_rule import SpikeRule, episodes, firing, load_rule
from bench.detect_sources import USS_LABELS, Traffic, simulator_traffic, uss_traffic
from bench.use_overall import OVERALL_RUBRIC, recipe_featurizer
from bench.use_whole import DSAT_RUBRIC, SERVED_FEATURIZER, scoring_cpu_ms
from distill.datasets import SHARED_DATA
from distill.train import TrainingSet, train_items
from monitor.contracts.errors import ConfigError

MIN_POSITIVES = 10  # train_items' default: an item with fewer is not trained
Progress = Callable[[str, int, int], None]  # (message, steps done, steps in all)


@dataclass(frozen=True)
class DetectConfig:
    sources: Sequence[str] = ("uss",)
    data_dir: Path = SHARED_DATA
    datasets: Sequence[str] = ("MWOZ", "SGD", "CCPE")
    sim_pool: int = 3000  # simulator conversations (split in two like the USS dialogues)
    volume_per_hour: int = 10_000
    rates: Sequence[float] = (0.1, 0.02)
    factors: Sequence[float] = (2.0, 3.0)
    base_share: float = 0.1
    seeds: Sequence[int] = tuple(range(10))
    quiet_days: float = 7.0
    history_hours: float = 72.0
    spike_minutes: int = 120
    judge_noise: float = 0.0
    train_fraction: float = 0.5
    train_hours: float = 24.0
    max_training_labels: int = 3000
    limit: int | None = None  # dialogues per file (smoke runs)
    label: str = "spur"  # USS traffic's label: a key of USS_LABELS
    featurizer: str = SERVED_FEATURIZER  # the distilled model's featurizer spec, as `distill train --featurizer`
    rule: SpikeRule = field(default_factory=load_rule)


@dataclass
class Pool:
    """The replay split: human label, judge-label source and the served model's outputs per dialogue."""

    dsat: np.ndarray
    proba: np.ndarray
    verdict: np.ndarray


def simulate(share: np.ndarray, pool: Pool, rate: float, config: DetectConfig,
             rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per-minute sums (:data:`STATS`) of a stream whose DSAT share is ``share[minute]``."""
    minutes = len(share)
    counts = rng.poisson(config.volume_per_hour / 60, minutes)
    minute = np.repeat(np.arange(minutes), counts)
    dsat_rows, sat_rows = np.flatnonzero(pool.dsat), np.flatnonzero(~pool.dsat)
    is_dsat = rng.random(len(minute)) < share[minute]
    row = np.where(is_dsat, dsat_rows[rng.integers(len(dsat_rows), size=len(minute))],
                   sat_rows[rng.integers(len(sat_rows), size=len(minute))])
    y = (pool.dsat[row] ^ (rng.random(len(minute)) < config.judge_noise)).astype(float)
    f = pool.proba[row]
    judged = (rng.random(len(minute)) < rate).astype(float)
    r = judged * (y - f)
    columns = {"N": np.ones(len(minute)), "F": f, "V": pool.verdict[row].astype(float), "T": y,
               "n": judged, "Y": judged * y, "R": r, "R2": r * r}
    return {k: np.bincount(minute, weights=columns[k], minlength=minutes) for k in STATS}


def _train(train: list[Any], dsat: np.ndarray, X: Any, n_labels: int, config: DetectConfig, seed: int,
           rng: np.random.Generator) -> tuple[Any, Any, int]:
    """The served model on what the judge slice of baseline traffic labels: distinct training-split dialogues
    at the baseline share (as many as the split holds at that share, at most ``n_labels``)."""
    pos, neg = np.flatnonzero(dsat), np.flatnonzero(~dsat)
    n = min(n_labels, int(len(pos) / config.base_share), int(len(neg) / (1 - config.base_share)))
    n_pos = round(n * config.base_share)
    if n_pos < MIN_POSITIVES or n - n_pos < MIN_POSITIVES:
        raise ConfigError(f"bench detect: the training split holds {len(pos)} DSAT and {len(neg)} other conversations, "
                          f"{n_pos} DSAT at the baseline share {config.base_share:g}: the served recipe needs "
                          f"{MIN_POSITIVES} of each class (more conversations: --limit, --sim-pool)")
    rows = np.concatenate([rng.choice(pos, n_pos, replace=False), rng.choice(neg, n - n_pos, replace=False)])
    labels = (dsat[rows] ^ (rng.random(len(rows)) < config.judge_noise)).astype(float)[:, None]
    rubric = OVERALL_RUBRIC if config.label == "overall" else DSAT_RUBRIC
    data = TrainingSet([train[i] for i in rows], labels, rubric.item_ids,
                       np.array([train[i].conversation_id for i in rows], dtype=object))
    trained = train_items(data, recipe_featurizer(config.featurizer), rubric=rubric, features=X[rows],
                          random_state=seed)
    return trained.model, trained.featurizer, len(rows)


def _served_pool(train: list[Any], dsat: np.ndarray, X: Any, replay: list[Any], replay_dsat: np.ndarray,
                 X_replay: Any, n_labels: int, config: DetectConfig, seed: int,
                 rng: np.random.Generator) -> tuple[Pool, dict[str, Any]]:
    """Train the served model, score the replay split (its featurizer's transform: the rows of X_replay)."""
    model, featurizer, used = _train(train, dsat, X, n_labels, config, seed, rng)
    proba = model.predict_proba(X_replay)[:, 0]
    pool = Pool(replay_dsat, proba, proba >= float(model.thresholds[0]))
    cpu_ms = scoring_cpu_ms(lambda b: model.predict_proba(featurizer.transform(b)), replay[:300], 1)
    return pool, {"training_labels": used, "heldout_auc": float(roc_auc_score(replay_dsat, proba)),
                  "score_cpu_ms_per_conversation": cpu_ms}


def _summary(values: Sequence[float | None]) -> dict[str, Any]:
    got = [v for v in values if v is not None and np.isfinite(v)]
    if not got:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": round(float(np.median(got)), 4), "min": round(float(np.min(got)), 4),
            "max": round(float(np.max(got)), 4), "n": len(got)}


def _errors(target: np.ndarray, s: Series, start: int, stop: int) -> dict[str, float | None]:
    err = 100 * (s.rate[start:stop] - target[start:stop])
    covered = np.abs(s.rate[start:stop] - target[start:stop]) <= Z95 * s.se[start:stop]
    has_se = np.isfinite(s.se[start:stop]).any()
    return {"mae_points": float(np.nanmean(np.abs(err))), "bias_points": float(np.nanmean(err)),
            "coverage95": float(np.mean(covered)) if has_se else None}


def _seed_run(traffic: Traffic, X: Any, config: DetectConfig, seed: int, step: Callable[[str], None],
              keep: dict[str, Any] | None) -> dict[str, Any]:
    conversations, dsat, groups = traffic.conversations, traffic.dsat, traffic.groups
    split = GroupShuffleSplit(n_splits=1, train_size=config.train_fraction, random_state=seed)
    train_idx, replay_idx = next(split.split(np.zeros(len(dsat)), dsat, groups))
    rng = np.random.default_rng(seed)
    rule = config.rule
    out: dict[str, Any] = {"seed": seed, "rates": {}, "conversations": 0}
    start = int(config.history_hours * 60)
    replay = [conversations[i] for i in replay_idx]
    models: dict[int, tuple[Pool, dict[str, Any]]] = {}
    for rate in config.rates:
        n_labels = min(int(rate * config.volume_per_hour * config.train_hours), config.max_training_labels)
        if n_labels not in models:
            step(f"{traffic.name}, seed {seed}: training the served model on {n_labels} judged labels")
            models[n_labels] = _served_pool([conversations[i] for i in train_idx], dsat[train_idx], X[train_idx],
                                            replay, dsat[replay_idx], X[replay_idx], n_labels, config, seed, rng)
        else:
            step(f"{traffic.name}, seed {seed}: the served model on {n_labels} judged labels (trained above)")
        pool, info = models[n_labels]
        got: dict[str, Any] = dict(info)
        step(f"{traffic.name}, seed {seed}, judge rate {rate:g}: {config.quiet_days:g} days without a spike")
        quiet_minutes = int(config.quiet_days * 24 * 60)
        stats = simulate(np.full(quiet_minutes, config.base_share), pool, rate, config, rng)
        out["conversations"] += int(stats["N"].sum())
        target, series = estimate(stats, rule, rate)
        got["quiet"] = {e: {"false_alarms_per_day": len(episodes(firing(s.condition, rule))) / config.quiet_days,
                            **_errors(target, s, rule.window, quiet_minutes)} for e, s in series.items()}
        got["spike"] = {}
        for factor in config.factors:
            step(f"{traffic.name}, seed {seed}, judge rate {rate:g}: a {factor:g}x spike")
            share = np.full(start + config.spike_minutes + 60, config.base_share)
            share[start:start + config.spike_minutes] = min(1.0, factor * config.base_share)
            stats = simulate(share, pool, rate, config, rng)
            out["conversations"] += int(stats["N"].sum())
            target, series = estimate(stats, rule, rate)
            spike = {}
            horizon = start + config.spike_minutes + rule.window  # after that, no window holds the spike
            for e, s in series.items():
                fired = np.flatnonzero(firing(s.condition, rule)[start:horizon])
                spike[e] = {"minutes_to_detect": int(fired[0]) + 1 if len(fired) else None,
                            **_errors(target, s, start + rule.window, start + config.spike_minutes)}
            got["spike"][f"{factor:g}x"] = spike
            if keep is not None and rate == config.rates[0]:
                keep[f"{factor:g}x"] = {"target": target, "series": series, "start": start,
                                        "fired": {e: firing(s.condition, rule) for e, s in series.items()}}
        out["rates"][f"{rate:g}"] = got
    return out


def _rows(runs: list[dict[str, Any]], config: DetectConfig) -> list[dict[str, Any]]:
    rows = []
    for rate in (f"{r:g}" for r in config.rates):
        per = [run["rates"][rate] for run in runs]
        for e in ESTIMATORS:
            row: dict[str, Any] = {"rate": float(rate), "estimator": e,
                                   "false_alarms_per_day": _summary([p["quiet"][e]["false_alarms_per_day"]
                                                                     for p in per]),
                                   "false_alarms": sum(round(p["quiet"][e]["false_alarms_per_day"] * config.quiet_days)
                                                       for p in per),
                                   "quiet_mae_points": _summary([p["quiet"][e]["mae_points"] for p in per]),
                                   "quiet_bias_points": _summary([p["quiet"][e]["bias_points"] for p in per]),
                                   "quiet_coverage95": _summary([p["quiet"][e]["coverage95"] for p in per])}
            for factor in (f"{f:g}x" for f in config.factors):
                got = [p["spike"][factor][e] for p in per]
                minutes = [g["minutes_to_detect"] for g in got]
                row[factor] = {"detected": sum(m is not None for m in minutes), "of": len(minutes),
                               "minutes_to_detect": _summary(minutes), "per_seed": minutes,
                               "spike_mae_points": _summary([g["mae_points"] for g in got])}
            rows.append(row)
    return rows


def _source(traffic: Traffic, config: DetectConfig, step: Callable[[str], None],
            keep: dict[str, Any]) -> dict[str, Any]:
    cpu = time.process_time()
    X = recipe_featurizer(config.featurizer).transform(traffic.conversations)  # stateless: once for all
    runs = [_seed_run(traffic, X, config, seed, step, keep if k == 0 else None) for k, seed in enumerate(config.seeds)]
    per_model = [run["rates"][r] for run in runs for r in run["rates"]]
    out: dict[str, Any] = {
        "source": traffic.name, "conversations": len(traffic.conversations),
        "dsat_share": round(float(traffic.dsat.mean()), 4),
        "judge": f"oracle: {traffic.label}, flipped with probability {config.judge_noise:g}",
        "model": {"recipe": f"served: distill.train.train_items, {config.featurizer} featurizer, one item on the label",
                  "training": f"distinct training-split conversations at the baseline share: min(rate x "
                              f"{config.volume_per_hour}/h x {config.train_hours:g} h, {config.max_training_labels}, "
                              "what the split holds at that share) judged labels",
                  "training_labels": _summary([m["training_labels"] for m in per_model]),
                  "heldout_auc": _summary([m["heldout_auc"] for m in per_model]),
                  "score_cpu_ms_per_conversation": round(per_model[0]["score_cpu_ms_per_conversation"], 3)},
        "rows": _rows(runs, config), "runs": runs,
        "simulated_conversations": sum(run["conversations"] for run in runs),
        "cpu_s": round(time.process_time() - cpu, 1)}
    out["cpu_us_per_simulated_conversation"] = round(1e6 * out["cpu_s"] / max(out["simulated_conversations"], 1), 3)
    return out


def run_detect(config: DetectConfig, progress: Progress | None = None, plot: Path | None = None) -> dict[str, Any]:
    if config.label not in USS_LABELS:
        raise ConfigError(f"bench detect: label must be one of {', '.join(USS_LABELS)}. Got {config.label!r} instead.")
    recipe_featurizer(config.featurizer)  # an unknown featurizer fails here, before any work
    wall = time.perf_counter()
    total = len(config.sources) * len(config.seeds) * (len(config.rates) * (2 + len(config.factors)))
    done = 0

    def step(message: str) -> None:
        nonlocal done
        if progress is not None:
            progress(message, done, total)
        done += 1

    keep: dict[str, dict[str, Any]] = {}
    results = []
    for name in config.sources:
        traffic = (uss_traffic(config.data_dir, list(config.datasets), config.limit, config.label) if name == "uss"
                   else simulator_traffic(config.sim_pool, config.seeds[0]))
        results.append(_source(traffic, config, step, keep.setdefault(traffic.name, {})))
    if progress is not None:
        progress("done", total, total)
    out: dict[str, Any] = {
        "volume_per_hour": config.volume_per_hour, "base_share": config.base_share,
        "factors": list(config.factors), "rates": list(config.rates), "seeds": list(config.seeds),
        "quiet_days": config.quiet_days, "history_hours": config.history_hours,
        "spike_minutes": config.spike_minutes, "judge_noise": config.judge_noise, "label": config.label,
        "featurizer": config.featurizer,
        "rule": asdict(config.rule), "sources": results,
        "cpu_s": round(sum(r["cpu_s"] for r in results), 1), "wall_s": round(time.perf_counter() - wall, 1),
    }
    if plot is not None:
        from bench.detect_plot import plot_detect  # matplotlib only when a plot is asked for

        out["plot"] = str(plot_detect(keep, config, plot))
    return out
