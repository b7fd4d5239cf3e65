"""``bench distill``: how faithfully the distilled classifiers reproduce their teacher, per rubric item.

The teacher here is the simulator's ground truth (:class:`monitor.judge.simulated.SimulatedJudge`)
on conversations from :class:`monitor.tools.simulator.generate.ConversationGenerator`, not an LLM: the
numbers measure the distillation machinery (featurizer + :func:`distill.train.train_items` +
:func:`distill.promotion.evaluate`) on template-generated text, which is easier than real traffic.
Training sets are nested prefixes of one labelled stream (100 of 300 of 1000 ...), the held-out set
is a separate stream with another seed, so every size is scored on the same rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from distill.featurizers.spec import make_featurizer
from distill.promotion import evaluate
from distill.train import TrainingSet, train_items
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import REPO_ROOT
from monitor.judge.simulated import SimulatedJudge
from monitor.tools.simulator.generate import ConversationGenerator

TEACHER = "simulated ground truth (monitor.judge.simulated.SimulatedJudge on ConversationGenerator conversations)"


@dataclass(frozen=True)
class FidelityConfig:
    labels: Sequence[int] = (100, 300, 1000, 3000)
    featurizers: Sequence[str] = ("hashing", "minilm")
    test_size: int = 2000
    rubric: str = "spur-copilot"
    seed: int = 0
    min_positives: int = 10


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


def run_fidelity(config: FidelityConfig, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Per-item AUC rows for every (featurizer, label count), plus one summary row per pair."""
    rubric = load_rubric_set(config.rubric, REPO_ROOT / "prompts")
    pool = labelled_stream(rubric, max(config.labels), seed=config.seed, prefix="train")
    test = labelled_stream(rubric, config.test_size, seed=config.seed + 1_000_003, prefix="test")
    results: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    for spec in config.featurizers:
        for n in sorted(config.labels):
            if progress:
                progress(f"distill {spec} labels={n}")
            data = pool.subset(np.arange(n))
            trained = train_items(data, make_featurizer(spec), rubric=rubric, min_positives=config.min_positives,
                                  random_state=config.seed)
            scored = evaluate(trained.model, trained.featurizer, test).items
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
    return {"teacher": TEACHER, "rubric": rubric.key, "test_size": config.test_size, "results": results,
            "summary": summary}
