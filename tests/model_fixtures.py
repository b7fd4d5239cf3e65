"""Publishing a real distilled model for integration tests: trained on simulated conversations,
labelled by the simulator's ground truth (the simulated judge)."""

from __future__ import annotations

import asyncio

import numpy as np

from distill.registry import ModelRegistry
from distill.train import TrainingSet, train_items
from monitor.events import EndEvent, TurnEvent
from monitor.judge.simulated import SimulatedJudge
from monitor.rubrics import RubricSet
from monitor.sessionize import Limits, apply_end, apply_turn
from monitor.settings import Settings
from monitor.simulator.generate import ConversationGenerator


def simulated_training_set(rubric: RubricSet, n: int = 400, seed: int = 99) -> TrainingSet:
    generator = ConversationGenerator(rubric, seed=seed)
    judge = SimulatedJudge(rubric)
    conversations, labels = [], []
    for i in range(n):
        sim = generator.generate(f"train-{seed}-{i}", 1.7e9 + i, dsat_factor=2.0)
        state = None
        for event in sim.events[:-1]:
            state, _ = apply_turn(state, TurnEvent(**event), Limits(), now=0.0)
        _, conversation, _ = apply_end(state, EndEvent(**sim.events[-1]), now=0.0)
        score = asyncio.run(judge.score(conversation))
        conversations.append(conversation)
        labels.append([float(item.verdict) for item in score.items])
    return TrainingSet(conversations=conversations, labels=np.array(labels), item_ids=rubric.item_ids,
                       groups=np.arange(n))


def publish_distilled_model(settings: Settings, rubric: RubricSet, *, featurizer: str = "hashing") -> str:
    trained = train_items(simulated_training_set(rubric), featurizer, rubric=rubric, min_positives=5)
    registry = ModelRegistry(settings.model_registry)
    return registry.publish("distilled", trained.model.to_arrays(), trained.model.manifest(), promote=True)
