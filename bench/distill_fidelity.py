"""``bench distill``: how faithfully the distilled classifiers reproduce their teacher, per rubric item.

The teacher here is the simulator's ground truth (:class:`monitor.judge.simulated.SimulatedJudge`)
on conversations from :class:`monitor.tools.simulator.generate.ConversationGenerator`, not an LLM: the
numbers measure the distillation machinery (featurizer + :func:`distill.train.train_items` +
:func:`distill.promotion.evaluate`) on template-generated text, which is easier than real traffic.
Training sets are nested prefixes of one labelled stream (100 of 300 of 1000 ...), the held-out set
is a separate stream with another seed, so every size is scored on the same rows.

A harder teacher, on real text: the USS human labels (:data:`USS_TEACHER`). One stand-in DSAT item,
``dsat.dissatisfied_turn``, "the user is dissatisfied at some turn" (an upstream turn rating <= 2),
on whole USS dialogues of every file; a seeded shuffle gives the held-out set and the pool the
nested training sets come from.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from distill.datasets import SHARED_DATA, load_uss
from distill.featurizers.spec import make_featurizer
from distill.promotion import evaluate
from distill.train import TrainingSet, train_items
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.rubric_set import RubricItem, RubricSet, load_rubric_set
from monitor.contracts.settings import REPO_ROOT
from monitor.judge.simulated import SimulatedJudge
from monitor.tools.simulator.generate import ConversationGenerator

TEACHER = "simulated ground truth (monitor.judge.simulated.SimulatedJudge on ConversationGenerator conversations)"
USS_TEACHER = ("USS human turn ratings (Sun et al., SIGIR 2021): item `dsat.dissatisfied_turn` = some user turn of the "
               "dialogue has an upstream rating <= 2 (most frequent annotator rating, ties low)")
USS_RUBRIC = RubricSet(id="uss-stand-in", version="1", name="USS human DSAT stand-in", items=[RubricItem(
    id="dsat.dissatisfied_turn", name="Dissatisfied turn", polarity="dsat",
    description="At some turn the user is dissatisfied with the assistant (human rating <= 2 of 5).")])


@dataclass(frozen=True)
class FidelityConfig:
    labels: Sequence[int] = (100, 300, 1000, 3000)
    featurizers: Sequence[str] = ("hashing", "minilm")
    test_size: int = 2000
    rubric: str = "spur-copilot"
    seed: int = 0
    min_positives: int = 10
    uss: bool = True  # also the USS human teacher
    data_dir: Path = SHARED_DATA
    uss_files: Sequence[str] = ("MWOZ", "SGD", "CCPE")
    uss_labels: Sequence[int] = (100, 300, 1000)
    uss_featurizers: Sequence[str] | None = None  # None: the same as ``featurizers``
    uss_test_size: int = 1000


def simulated_conversation(events: list[dict[str, Any]], truth: list[str], conversation_id: str) -> Conversation:
    """The finished conversation the sessionizer would emit for a simulator event list."""
    turns = [Turn(index=e["turn_index"], role=e["role"], text=e["text"], timestamp=e["timestamp"])
             for e in events if e.get("type") == "turn"]
    metadata: dict[str, str] = next((e["metadata"] for e in events if e.get("metadata")), {})
    return Conversation(conversation_id=conversation_id, turns=turns, metadata=metadata, simulated_truth=truth,
                        end_reason="end")


def labelled_stream(rubric: RubricSet, n: int, *, seed: int, prefix: str) -> TrainingSet:
    """``n`` simulated conversations labelled by the simulated judge (1/0 per rubric item)."""
    generator = ConversationGenerator(rubric, seed=seed)
    judge = SimulatedJudge(rubric)
    conversations = []
    for i in range(n):
        sim = generator.generate(f"{prefix}-{i}", 1.7e9 + 60 * i)
        conversations.append(simulated_conversation(sim.events, sim.truth, sim.conversation_id))

    async def label_all() -> list[list[bool]]:
        scores = [await judge.score(c) for c in conversations]
        return [[bool(item.verdict) for item in s.items] for s in scores]

    verdicts = np.array(asyncio.run(label_all()), dtype=float).reshape(n, len(rubric.items))
    return TrainingSet(conversations=conversations, labels=verdicts, item_ids=rubric.item_ids,
                       groups=np.array([c.conversation_id for c in conversations], dtype=object))


def uss_labelled(config: FidelityConfig) -> tuple[TrainingSet, TrainingSet]:
    """(pool, held-out) of whole USS dialogues labelled 1/0 for ``dissatisfied_turn``."""
    dialogues = []
    for name in config.uss_files:
        path = Path(config.data_dir) / "uss" / f"{name}.txt"
        if not path.is_file():
            raise ConfigError(f"USS file {path} not found (bench distill --no-uss skips the USS teacher)")
        dialogues += load_uss(path)
    needed = max(config.uss_labels) + config.uss_test_size
    if needed > len(dialogues):
        raise ConfigError(f"the USS teacher needs {needed} dialogues (labels + held-out), "
                          f"the files have {len(dialogues)}")
    order = np.random.default_rng(config.seed).permutation(len(dialogues))
    data = TrainingSet(conversations=[dialogues[i].to_conversation() for i in order],
                       labels=np.array([[float(dialogues[i].dissatisfied)] for i in order]),
                       item_ids=USS_RUBRIC.item_ids, groups=np.array([dialogues[i].dialogue_id for i in order],
                                                                      dtype=object))
    test = data.subset(np.arange(config.uss_test_size))
    return data.subset(np.arange(config.uss_test_size, needed)), test


def _fidelity(pool: TrainingSet, test: TrainingSet, rubric: RubricSet, labels: Sequence[int], config: FidelityConfig,
              progress: Callable[[str], None] | None, tag: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per-item AUC rows for every (featurizer, label count), plus one summary row per pair.

    Each featurizer encodes the pool and the held-out set once (featurizers are stateless)."""
    results: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    for spec in config.featurizers:
        if progress:
            progress(f"distill {tag} {spec}: featurizing")
        featurizer = make_featurizer(spec)
        X_pool = featurizer.fit_transform(pool.conversations)
        X_test = featurizer.transform(test.conversations)
        for n in sorted(labels):
            if progress:
                progress(f"distill {tag} {spec} labels={n}")
            data = pool.subset(np.arange(n))
            trained = train_items(data, featurizer, rubric=rubric, min_positives=config.min_positives,
                                  random_state=config.seed, features=X_pool[:n])
            scored = evaluate(trained.model, trained.featurizer, test, features=X_test).items
            aucs = []
            for j, item_id in enumerate(rubric.item_ids):
                metrics = scored.get(item_id)
                auc = metrics.roc_auc if metrics else None
                if auc is not None:
                    aucs.append(auc)
                results.append({"featurizer": spec, "item": item_id, "labels": n,
                                "auc": None if auc is None else round(auc, 4),
                                "train_positives": int(np.nansum(data.labels[:, j])),
                                "test_positives": int(np.nansum(test.labels[:, j])),
                                "status": trained.status[item_id]})
            summary.append({"featurizer": spec, "labels": n,
                            "macro_auc": round(float(np.mean(aucs)), 4) if aucs else None,
                            "min_auc": round(float(np.min(aucs)), 4) if aucs else None, "items": len(aucs),
                            "untrained": sum(s != "trained" for s in trained.status.values())})
    return results, summary


def run_fidelity(config: FidelityConfig, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Simulator teacher (``results``, ``summary``) and, with ``config.uss``, the USS human teacher (``uss``)."""
    rubric = load_rubric_set(config.rubric, REPO_ROOT / "prompts")
    pool = labelled_stream(rubric, max(config.labels), seed=config.seed, prefix="train")
    test = labelled_stream(rubric, config.test_size, seed=config.seed + 1_000_003, prefix="test")
    results, summary = _fidelity(pool, test, rubric, config.labels, config, progress, "simulator")
    out: dict[str, Any] = {"teacher": TEACHER, "rubric": rubric.key, "test_size": config.test_size,
                           "results": results, "summary": summary}
    if config.uss:
        uss_pool, uss_test = uss_labelled(config)
        featurizers = config.featurizers if config.uss_featurizers is None else config.uss_featurizers
        uss_results, uss_summary = _fidelity(uss_pool, uss_test, USS_RUBRIC, config.uss_labels,
                                             replace(config, featurizers=featurizers), progress, "uss")
        out["uss"] = {"teacher": USS_TEACHER, "files": list(config.uss_files), "test_size": config.uss_test_size,
                      "test_positive_rate": round(float(uss_test.labels.mean()), 4), "results": uss_results,
                      "summary": uss_summary}
    return out
