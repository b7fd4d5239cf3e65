"""A score record with every field set, and a judge's evaluator: what the score codec and the stores are tested with."""

from __future__ import annotations

from monitor.contracts.evaluator import Evaluator
from monitor.contracts.scores import ItemResult, ScoreRecord
from tests.support.hot_path import RUBRIC

__all__ = ["EVALUATOR", "RUBRIC", "record"]


def record(**kw: object) -> ScoreRecord:
    items = [ItemResult(item_id=i.id, polarity=i.polarity, probability=round(0.05 * (j % 20), 3), verdict=j % 3 == 0)
             for j, i in enumerate(RUBRIC.items)]
    base = {"conversation_id": "conv-000123", "scorer": "distilled", "judge": "hashing", "rubric_set": RUBRIC.id,
            "rubric_version": RUBRIC.version, "model_version": "20261124T062000-3f2a9c", "items": items, "R": -1.25,
            "metadata": {"app": "web", "locale": "en-US", "model_version": "v7"}, "latency_s": 0.000123,
            "scored_at": 1795260000.123}
    return ScoreRecord.model_validate({**base, **kw})


EVALUATOR = Evaluator(model="gpt-4o-mini-2024-07-18", endpoint="https://api.openai.com/v1", prompt="sha256:0123abcd",
                      rubric=f"{RUBRIC.id}@{RUBRIC.version}", mode="spur", version="0.1.0")
