"""``bench cost``: at what judge slice do the exported per-item rates stay within +-1 point, and at what spend.

A stream of ``volume`` conversations per hour is cut into 1-hour windows. Each window draws its
conversations (with replacement) from an evaluation pool whose per-item labels are known, so the
rate the monitor would export by judging *all* of that hour's traffic is known exactly. For each
judge slice r, a uniform share r of the window is judged (an independent U[0,1) draw per
conversation, as the router's hash) and three estimators of each item's rate are compared with it:

* judge-only: the judged share's mean (the Hajek rate of a uniform slice);
* distilled-only: the mean distilled probability over the whole window;
* prediction-powered (difference): the distilled mean plus the judged slice's mean residual
  (label - probability), which removes the distilled models' bias (Angelopoulos et al., Science 2023);
* the same with PPI++ power tuning (see :mod:`bench.cost_windows`).

The main table is at ``volume_per_hour``; the same rows at each of ``volumes`` give the smallest slice
within tolerance as a function of volume (a window of V conversations an hour over H hours is the
same sample as V*H in one hour, so the sweep also reads as "how long a window at this volume").

The distilled models are trained with the real code (:func:`distill.train.train_items`, hashing
features) on the labels a slice r collects in ``train_hours`` hours (from a separate training pool,
capped at ``max_training_labels``), so a smaller slice also means a weaker model. Windows drift:
each mixes the normal and the spike regime of the simulator (or, for USS, the two corpora) in a
random share, so a window's rates move and a distilled model's bias is not the same in every hour.

Sources: (1) the simulator's ground truth for the full rubric, seen through a judge that flips each
verdict with probability ``judge_noise``; (2) USS human turn ratings (rating <= 2: "dissatisfied
now") as the teacher of one stand-in DSAT item on rated conversation prefixes of MWOZ and SGD.
Spend per 1M conversations: the SPUR prompt the judge would be sent (system + conversation +
answer schema) and the answer JSON, at ~4 characters per token, at ``DEFAULT_PRICES[model]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.cost_windows import ESTIMATORS, Regime, window_errors
from bench.distill_fidelity import simulated_conversation
from distill.datasets.uss import load_uss, rated_prefixes
from distill.featurizers.spec import make_featurizer
from distill.train import TrainingSet, train_items
from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import RubricItem, RubricSet, load_rubric_set
from monitor.contracts.settings import DEFAULT_PRICES, REPO_ROOT, Settings
from monitor.judge.prompt import conversation_message, render, rubric_sections, spur_answer_format
from monitor.judge.simulated import SimulatedJudge
from monitor.judge.spur import spur_schema
from monitor.tools.simulator.generate import ConversationGenerator

USS_ITEM = RubricItem(id="dsat.dissatisfied_now", name="Dissatisfied now", polarity="dsat",
                      description="The user is dissatisfied at the latest turn (USS turn rating <= 2).")


@dataclass(frozen=True)
class CostConfig:
    volume_per_hour: int = 10_000
    volumes: Sequence[int] = (10_000, 100_000, 1_000_000)  # the smallest-slice sweep (volume x window hours)
    slices: Sequence[float] = (1.0, 0.1, 0.02, 0.01, 0.005)
    windows: int = 200
    judge_noise: float = 0.05
    train_hours: float = 24.0
    max_training_labels: int = 3000  # the training pool's cap (keeps a run to minutes on 2 cores)
    sim_pool: int = 3000  # simulated conversations per regime and role (train / normal eval / spike eval)
    spike_factor: float = 3.0
    uss_files: Sequence[str] = ("MWOZ", "SGD")
    data_dir: Path = field(default_factory=lambda: REPO_ROOT.parent / "shared" / "data")
    model: str = "gpt-4o-mini"
    tolerance_points: float = 1.0
    seed: int = 0
    min_positives: int = 10


@dataclass
class Source:
    """A labelled stream: a training pool and two evaluation regimes, each (conversations, labels)."""

    name: str
    teacher: str
    rubric: RubricSet
    train: TrainingSet
    regimes: list[TrainingSet]


def _noisy(labels: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    flip = rng.random(labels.shape) < noise
    return np.where(flip, 1.0 - labels, labels)


def simulator_source(config: CostConfig) -> Source:
    rubric = load_rubric_set("spur-copilot", REPO_ROOT / "prompts")
    judge = SimulatedJudge(rubric)
    rng = np.random.default_rng(config.seed)

    def stream(n: int, seed: int, factor: float, prefix: str) -> TrainingSet:
        generator = ConversationGenerator(rubric, seed=seed)
        conversations = []
        for i in range(n):
            sim = generator.generate(f"{prefix}-{i}", 1.7e9 + 60 * i, dsat_factor=factor)
            conversations.append(simulated_conversation(sim.events, sim.truth, sim.conversation_id))

        async def label() -> list[list[bool]]:
            return [[bool(i.verdict) for i in (await judge.score(c)).items] for c in conversations]

        truth = np.array(asyncio.run(label()), dtype=float).reshape(n, len(rubric.items))
        return TrainingSet(conversations, _noisy(truth, config.judge_noise, rng), rubric.item_ids,
                           np.array([c.conversation_id for c in conversations], dtype=object))

    n = config.sim_pool
    return Source("simulator", f"simulator ground truth through a judge flipping each verdict with probability "
                  f"{config.judge_noise}", rubric, stream(n, config.seed, 1.0, "train"),
                  [stream(n, config.seed + 1, 1.0, "normal"), stream(n, config.seed + 2, config.spike_factor, "spike")])


def uss_source(config: CostConfig) -> Source:
    rubric = RubricSet(id="uss-cost", version="1", items=[USS_ITEM])
    uss_dir = config.data_dir / "uss" if (config.data_dir / "uss").is_dir() else config.data_dir
    rng = np.random.default_rng(config.seed)
    train_parts: list[TrainingSet] = []
    regimes: list[TrainingSet] = []
    for name in config.uss_files:
        prefixes = [p for d in load_uss(uss_dir / f"{name}.txt") for p in rated_prefixes(d)]
        dialogues = sorted({c.metadata["dialogue_id"] for c, _ in prefixes})
        held = set(rng.choice(dialogues, size=len(dialogues) // 2, replace=False).tolist())
        for part, keep in ((train_parts, False), (regimes, True)):
            rows = [(c, t) for c, t in prefixes if (c.metadata["dialogue_id"] in held) == keep]
            part.append(TrainingSet([c for c, _ in rows], np.array([[float((t.rating or 3) <= 2)] for _, t in rows]),
                                    rubric.item_ids, np.array([c.metadata["dialogue_id"] for c, _ in rows],
                                                              dtype=object)))
    train = train_parts[0]
    for extra in train_parts[1:]:
        train = TrainingSet(train.conversations + extra.conversations, np.vstack([train.labels, extra.labels]),
                            train.item_ids, np.concatenate([train.groups, extra.groups]))
    return Source("uss", "USS human turn ratings (rating <= 2) on rated prefixes of "
                  + ", ".join(config.uss_files) + f"; regimes: {' / '.join(config.uss_files)}", rubric, train, regimes)


def spend_per_million(conversations: Sequence[Conversation], rubric: RubricSet, config: CostConfig) -> dict[str, Any]:
    """USD per 1M judged conversations: the SPUR prompt and answer at ~4 characters per token."""
    settings = Settings()
    answer_format = spur_answer_format(rubric.items)
    system = render(settings.prompts_dir, "spur_estimation", domain=settings.domain_description,
                    rubric_sections=rubric_sections(rubric.items), n_items=len(rubric.items), extra_rules="",
                    answer_format=answer_format)
    schema = orjson.dumps(spur_schema(rubric.items))
    answer = orjson.dumps({i.id: {"answer": "N", "score": 0} for i in rubric.items})
    sample = list(conversations)[:500]
    user = [conversation_message(settings.prompts_dir, c, max_chars=settings.judge_max_prompt_chars)[0]
            for c in sample]
    prompt_tokens = (len(system) + len(schema) + float(np.mean([len(u) for u in user]))) / 4
    output_tokens = len(answer) / 4
    price_in, price_out = DEFAULT_PRICES[config.model]
    per_conversation = (prompt_tokens * price_in + output_tokens * price_out) / 1e6
    return {"model": config.model, "prompt_tokens": round(prompt_tokens, 1), "output_tokens": round(output_tokens, 1),
            "usd_per_conversation": per_conversation, "usd_per_million_judged": round(per_conversation * 1e6, 2)}


def _train(source: Source, n: int, config: CostConfig) -> tuple[Any, Any, list[str]]:
    rows = np.random.default_rng(config.seed).permutation(len(source.train))[:n]
    trained = train_items(source.train.subset(rows), make_featurizer("hashing"), rubric=source.rubric,
                          min_positives=config.min_positives, random_state=config.seed)
    return trained.model, trained.featurizer, trained.model.item_ids


def _fit(source: Source, n_labels: int, config: CostConfig) -> tuple[list[Regime], int]:
    """The model trained on ``n_labels`` labels, as its probabilities on both evaluation regimes (and how many
    items it learnt); an item it could not learn is predicted at the regime's mean."""
    model, featurizer, item_ids = _train(source, n_labels, config)
    columns = [source.rubric.item_ids.index(i) for i in item_ids]
    regimes = []
    for regime in source.regimes[:2]:
        p = np.full(regime.labels.shape, np.nan)
        p[:, columns] = model.predict_proba(featurizer.transform(regime.conversations))
        regimes.append(Regime(regime.labels, np.where(np.isnan(p), np.nanmean(regime.labels, axis=0), p)))
    return regimes, len(item_ids)


def _rows(source: Source, config: CostConfig, volume: int, rng: np.random.Generator,
          models: dict[int, tuple[list[Regime], int]], spend: dict[str, Any],
          progress: Callable[[str], None] | None) -> list[dict[str, Any]]:
    rows = []
    for rate in sorted(config.slices, reverse=True):
        n_labels = min(int(rate * volume * config.train_hours), len(source.train), config.max_training_labels)
        if n_labels not in models:  # slices and volumes with the same training size share one model's predictions
            if progress:
                progress(f"cost {source.name}: slice {rate:.3%}, training on {n_labels} judged labels")
            models[n_labels] = _fit(source, n_labels, config)
        regimes, n_items = models[n_labels]
        errors = window_errors(regimes, volume, rate, config.windows, rng)
        per_item = {e: np.nanpercentile(np.abs(err), 95, axis=0) for e, err in errors.items()}
        rows.append({
            "slice": rate, "judged_per_hour": rate * volume,
            "training_labels": n_labels, "items_trained": n_items,
            "usd_per_million": round(rate * spend["usd_per_million_judged"], 2),
            **{f"{e}_p95_max_points": round(float(np.max(v)), 3) for e, v in per_item.items()},
            **{f"{e}_p95_median_points": round(float(np.median(v)), 3) for e, v in per_item.items()},
            "per_item_p95_points": {e: {i: round(float(x), 3) for i, x in zip(source.rubric.item_ids, v, strict=True)}
                                    for e, v in per_item.items()},
        })
    return rows


def _smallest(rows: list[dict[str, Any]], config: CostConfig) -> dict[str, float | None]:
    return {e: min((r["slice"] for r in rows if r[f"{e}_p95_max_points"] <= config.tolerance_points), default=None)
            for e in ESTIMATORS}


def run_source(source: Source, config: CostConfig, progress: Callable[[str], None] | None) -> dict[str, Any]:
    """The main table at ``volume_per_hour``, then the smallest slice within tolerance at each of ``volumes``."""
    rng = np.random.default_rng(config.seed + 7)
    spend = spend_per_million(source.regimes[0].conversations, source.rubric, config)
    models: dict[int, tuple[list[Regime], int]] = {}
    rows = _rows(source, config, config.volume_per_hour, rng, models, spend, progress)
    by_volume = []
    for volume in config.volumes:
        swept = rows if volume == config.volume_per_hour else _rows(source, config, volume, rng, models, spend,
                                                                     progress)
        by_volume.append({"volume_per_hour": volume, "smallest_slice_within_tolerance": _smallest(swept, config),
                          "p95_max_points": {e: {str(r["slice"]): r[f"{e}_p95_max_points"] for r in swept}
                                             for e in ESTIMATORS}})
    return {"source": source.name, "teacher": source.teacher, "items": len(source.rubric.items),
            "spend": spend, "rows": rows, "smallest_slice_within_tolerance": _smallest(rows, config),
            "by_volume": by_volume}


def run_cost(config: CostConfig, progress: Callable[[str], None] | None = None,
             sources: Sequence[str] = ("simulator", "uss"), plot: Path | None = None) -> dict[str, Any]:
    results = []
    for name in sources:
        if progress:
            progress(f"cost: building the {name} stream")
        source = simulator_source(config) if name == "simulator" else uss_source(config)
        results.append(run_source(source, config, progress))
    out = {"volume_per_hour": config.volume_per_hour, "volumes": list(config.volumes), "windows": config.windows,
           "window_hours": 1,
           "judge_noise": config.judge_noise, "train_hours": config.train_hours, "interval": "95th percentile of "
           "|error| over windows, in percentage points, max over items", "tolerance_points": config.tolerance_points,
           "model": config.model, "price_usd_per_million_tokens": list(DEFAULT_PRICES[config.model]),
           "sources": results}
    if plot is not None:
        from bench.cost_plot import plot_cost  # matplotlib only when a plot is asked for

        out["plot"] = str(plot_cost(out, plot))
    return out
