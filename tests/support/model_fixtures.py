"""Publishing a real distilled model for integration tests: trained on simulated conversations,
labelled by the simulator's ground truth (the simulated judge)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from distill.registry import ModelRegistry
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.settings import Settings
from monitor.tools.simulator.training import simulated_training_set, train_simulated_model

__all__ = ["publish_distilled_model", "simulated_training_set"]


_TRAINED: dict[tuple[str, str, tuple[str, ...], str], tuple[dict[str, np.ndarray], dict[str, Any]]] = {}


def publish_distilled_model(settings: Settings, rubric: RubricSet, *, featurizer: str = "hashing") -> str:
    """The simulated model, promoted live in ``settings``' registry. Trained once per test process for each rubric
    set and featurizer: a training takes about 6 s of CPU, and two dozen broker tests publish one."""
    key = (rubric.id, rubric.version, tuple(rubric.item_ids), featurizer)
    if key not in _TRAINED:
        _TRAINED[key] = train_simulated_model(rubric, featurizer=featurizer)
    arrays, manifest = _TRAINED[key]
    return ModelRegistry(settings.model_registry).publish("distilled", arrays, manifest, promote=True)


# --- calibration --------------------------------------------------------------------------------
CSAT_OFFSET = -1.5  # CSAT respondents are harsher than thumbs voters for the same conversation


def satisfaction_logit(verdicts: dict[str, bool], rubric: RubricSet) -> float:
    """Ground truth of the synthetic feedback: SAT items raise satisfaction, DSAT items lower it."""
    polarity = {item.id: item.polarity for item in rubric.items}
    return 0.5 + sum(1.5 if polarity[i] == "sat" else -2.0 if polarity[i] == "dsat" else 0.0
                     for i, yes in verdicts.items() if yes)


def feedback_label_records(rubric: RubricSet, n: int, *, seed: int = 0, judge: str = "simulated",
                           csat_offset: float = CSAT_OFFSET, tenant: str | None = None,
                           now: float | None = None) -> list:
    """Label-store records whose thumbs/CSAT feedback depends on the judge's verdicts (logistic model).

    Each item is "yes" with probability 0.15 (uncertain 5% of the time); about 60% of the
    conversations get a thumbs vote and 50% a CSAT answer (satisfied 4-5, not 1-2, some neutral 3s).
    """
    from distill.label_record import LabelRecord
    from monitor.contracts.events import Turn
    from monitor.contracts.scores import ItemResult, aggregate_r

    rng = np.random.default_rng(seed)
    now = time.time() if now is None else now
    records = []
    for k in range(n):
        verdicts = {item.id: bool(rng.random() < 0.15) for item in rubric.items}
        uncertain = {item.id for item in rubric.items if rng.random() < 0.05}
        items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=None if i.id in uncertain else verdicts[i.id],
                            uncertain=i.id in uncertain, score=7.0 if verdicts[i.id] else 0.0) for i in rubric.items]
        logit = satisfaction_logit({i: v for i, v in verdicts.items() if i not in uncertain}, rubric)
        thumbs = csat = None
        if rng.random() < 0.6:
            thumbs = "up" if rng.random() < 1 / (1 + np.exp(-logit)) else "down"
        if rng.random() < 0.5:
            if rng.random() < 0.1:
                csat = 3
            else:
                satisfied = rng.random() < 1 / (1 + np.exp(-(logit + csat_offset)))
                csat = int(rng.choice([4, 5]) if satisfied else rng.choice([1, 2]))
        records.append(LabelRecord(
            conversation_id=f"fb-{seed}-{k}", rubric_set=rubric.id, rubric_version=rubric.version, judge=judge,
            turns=[Turn(index=0, role="user", text="hello")], items=items, R=aggregate_r(items), thumbs=thumbs,
            csat=csat, metadata={"app": tenant} if tenant else {}, labelled_at=now - k,
        ))
    return records


def publish_calibration_model(settings: Settings, rubric: RubricSet, *, n: int = 600, seed: int = 5) -> str:
    """Train a calibration model on synthetic feedback for the simulated judge and make it live."""
    import torch

    from distill.calibration.feedback import calibration_set_from_labels
    from distill.calibration.retrain import train_calibration

    torch.set_num_threads(1)
    data = calibration_set_from_labels(feedback_label_records(rubric, n, seed=seed), rubric, llm_judge="simulated")
    registry = ModelRegistry(settings.model_registry)
    result = train_calibration(data, rubric=rubric, llm_judge="simulated", registry=registry)
    assert result.status == "promoted", result.reasons
    return str(result.version)
