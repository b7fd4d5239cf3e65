"""``bench sampler``: what uncertainty sampling buys, at equal judge spend, on a hash-only holdout.

Stream: USS rated conversation prefixes of MWOZ and SGD (human turn rating <= 2 as the teacher of a
stand-in DSAT item: harder than the simulator's templates, where every arm reaches AUC ~1). Half the
dialogues are the stream, the other half the holdout (uniform over dialogues: what the hash slice
gives). The stream arrives in ``rounds`` chunks; after each chunk the distilled model is retrained
(:func:`distill.train.train_items`, hashing, unweighted) on every label so far.

* uncertainty arm: the router's :class:`~monitor.stages.sampler.InclusionPolicy` with hash rate
  ``r/2`` and ``active_learning_rate`` ``r/2``, deciding each conversation of a chunk from the
  current model's probabilities (the first chunk, with no model yet, at hash rate ``r``);
* hash-only arm: exactly as many labels as the uncertainty arm took in the same chunk, drawn
  uniformly from that chunk, so both arms spend the same on the judge, chunk by chunk.

Reported: ROC-AUC on the holdout after the last round, per seed, and the mean gain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from bench.cost import USS_ITEM, CostConfig, uss_source
from distill.featurizers.spec import make_featurizer
from distill.train import TrainingSet, train_items
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.settings import REPO_ROOT
from monitor.stages.sampler import InclusionPolicy

_RUBRIC = RubricSet(id="uss-cost", version="1", items=[USS_ITEM])


@dataclass(frozen=True)
class SamplerConfig:
    rate: float = 0.15  # judged share of the stream in both arms
    rounds: int = 3
    seeds: Sequence[int] = (0, 1, 2)
    uss_files: Sequence[str] = ("MWOZ", "SGD")
    data_dir: Path = field(default_factory=lambda: REPO_ROOT.parent / "shared" / "data")
    min_positives: int = 5


def _fit(data: TrainingSet, seed: int, min_positives: int) -> tuple[Any, Any]:
    trained = train_items(data, make_featurizer("hashing"), rubric=_RUBRIC, min_positives=min_positives,
                          random_state=seed)
    return trained.model, trained.featurizer


def _auc(model: Any, featurizer: Any, holdout: TrainingSet) -> float:
    p = model.predict_proba(featurizer.transform(holdout.conversations))[:, 0]
    return float(roc_auc_score(holdout.labels[:, 0], p))


def _run_seed(stream: TrainingSet, holdout: TrainingSet, config: SamplerConfig, seed: int,
              progress: Callable[[str], None] | None) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(stream))
    chunks = np.array_split(order, config.rounds)
    policy = InclusionPolicy(base_rate=config.rate / 2, active_rate=config.rate / 2, salt=f"bench-{seed}")
    start = InclusionPolicy(base_rate=config.rate, salt=f"bench-{seed}")  # no model yet: nothing to boost with
    uncertain: list[int] = []
    uniform: list[int] = []
    model: Any = None
    featurizer: Any = None
    version = None
    for k, chunk in enumerate(chunks):
        p = (model.predict_proba(featurizer.transform([stream.conversations[i] for i in chunk]))[:, 0]
             if model is not None else None)
        router = policy if model is not None else start
        picks = [int(i) for j, i in enumerate(chunk) if router.decide(
            stream.conversations[i].conversation_id, probabilities=[float(p[j])] if p is not None else None,
            model_version=version).judge]
        uncertain += picks
        uniform += rng.choice(chunk, size=len(picks), replace=False).astype(int).tolist()
        if progress:
            progress(f"sampler seed {seed}: round {k + 1}/{config.rounds}, {len(uncertain)} labels per arm")
        model, featurizer = _fit(stream.subset(uncertain), seed, config.min_positives)
        version = f"round-{k}"
        policy.set_model(version, (model.info.get("reference") or {}).get("mean_uncertainty", {}).get("margin"))
    auc_uncertain = _auc(model, featurizer, holdout)
    hashed_model, hashed_featurizer = _fit(stream.subset(uniform), seed, config.min_positives)
    auc_hash = _auc(hashed_model, hashed_featurizer, holdout)
    return {"seed": seed, "labels": len(uncertain), "auc_hash_only": round(auc_hash, 4),
            "auc_uncertainty": round(auc_uncertain, 4), "gain": round(auc_uncertain - auc_hash, 4),
            "positives_hash_only": int(stream.labels[uniform, 0].sum()),
            "positives_uncertainty": int(stream.labels[uncertain, 0].sum())}


def run_sampler(config: SamplerConfig, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Hash-only vs uncertainty sampling at equal judge spend, per seed, on the same holdout."""
    source = uss_source(CostConfig(uss_files=config.uss_files, data_dir=config.data_dir))
    stream, holdout = source.train, source.regimes[0]
    for extra in source.regimes[1:]:
        holdout = TrainingSet(holdout.conversations + extra.conversations, np.vstack([holdout.labels, extra.labels]),
                              holdout.item_ids, np.concatenate([holdout.groups, extra.groups]))
    runs = [_run_seed(stream, holdout, config, seed, progress) for seed in config.seeds]
    gains = [r["gain"] for r in runs]
    return {"stream": f"USS rated prefixes of {', '.join(config.uss_files)} (teacher: human turn rating <= 2)",
            "stream_size": len(stream), "holdout_size": len(holdout), "rate": config.rate, "rounds": config.rounds,
            "policy": f"hash rate {config.rate / 2}, active_learning_rate {config.rate / 2}, margin uncertainty",
            "runs": runs, "mean_auc_hash_only": round(float(np.mean([r["auc_hash_only"] for r in runs])), 4),
            "mean_auc_uncertainty": round(float(np.mean([r["auc_uncertainty"] for r in runs])), 4),
            "mean_gain": round(float(np.mean(gains)), 4), "gain_sd": round(float(np.std(gains, ddof=1)), 4)
            if len(gains) > 1 else None}
