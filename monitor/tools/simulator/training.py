"""A distilled model trained on simulated conversations labelled by the simulated judge (the simulator's
ground truth): the demo's first live model, and the one integration tests publish."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from distill.registry import ModelRegistry
from distill.train import TrainingSet, train_items
from monitor.contracts.events import EndEvent, TurnEvent
from monitor.contracts.rubric_set import RubricSet
from monitor.judge.simulated import SimulatedJudge
from monitor.stages.session_store import DictStore
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.tools.simulator.generate import ConversationGenerator


def simulated_training_set(rubric: RubricSet, n: int = 400, seed: int = 99,
                           dsat_factor: float = 2.0) -> TrainingSet:
    """``n`` conversations sessionized as the worker does, labelled by the simulated judge."""
    generator = ConversationGenerator(rubric, seed=seed)
    judge = SimulatedJudge(rubric)
    conversations, labels = [], []
    for i in range(n):
        sim = generator.generate(f"train-{seed}-{i}", 1.7e9 + i, dsat_factor=dsat_factor)
        sessions = Sessionizer(DictStore(), Limits(), idle_timeout_s=1e9, closed_retention_s=1e9,
                               allowed_lateness_s=0.0)
        for event in sim.events[:-1]:
            sessions.turn(TurnEvent(**event), 0, now=0.0)
        _, [conversation] = sessions.end(EndEvent(**sim.events[-1]), 0, now=0.0, rekeyed=False)
        score = asyncio.run(judge.score(conversation))
        conversations.append(conversation)
        labels.append([float(bool(item.verdict)) for item in score.items])  # the simulated judge is never unsure
    return TrainingSet(conversations=conversations, labels=np.array(labels), item_ids=rubric.item_ids,
                       groups=np.arange(n))


def train_simulated_model(rubric: RubricSet, *, n: int = 400, seed: int = 99, dsat_factor: float = 2.0,
                          featurizer: str = "hashing", min_positives: int = 5) -> tuple[dict[str, np.ndarray],
                                                                                     dict[str, Any]]:
    """Train on :func:`simulated_training_set`: the model's arrays and manifest, for ``ModelRegistry.publish``."""
    trained = train_items(simulated_training_set(rubric, n, seed, dsat_factor), featurizer, rubric=rubric,
                          min_positives=min_positives)
    return trained.model.to_arrays(), trained.model.manifest()


def publish_simulated_model(registry: ModelRegistry, rubric: RubricSet, *, n: int = 400, seed: int = 99,
                            dsat_factor: float = 2.0, featurizer: str = "hashing", min_positives: int = 5) -> str:
    """Train on :func:`simulated_training_set` and promote the model to live; its version."""
    arrays, manifest = train_simulated_model(rubric, n=n, seed=seed, dsat_factor=dsat_factor, featurizer=featurizer,
                                             min_positives=min_positives)
    return registry.publish("distilled", arrays, manifest, promote=True)
