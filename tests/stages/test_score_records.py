"""The distilled score records are built without per-record validation (#31 item 7): each must equal the record
pydantic validates from the same values, and a model that returns no probability is refused, not exported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distill.registry import ModelRegistry
from monitor.contracts.score_codec import encode_score
from monitor.contracts.scores import ScoreRecord
from monitor.stages.classify import DistilledScorer
from tests.test_classify import convo, model_arrays, rubric

__all__ = ["model_arrays"]  # the module fixture, shared with tests/test_classify.py


def test_constructed_records_equal_validated_ones(tmp_path: Path, model_arrays: Any) -> None:
    registry = ModelRegistry(tmp_path)
    registry.publish("distilled", *model_arrays, promote=True)
    scorer = DistilledScorer(registry, rubric(), poll_s=60)
    records = scorer.score_batch([convo("h", "explain recursion", "thanks so much"), convo("x", "that is wrong")],
                                 shadow_flags=[True, False], sample_weights=[2.0, 1.0])
    assert records
    for record in records:
        validated = ScoreRecord.model_validate(record.model_dump())
        assert record == validated and record.model_dump() == validated.model_dump()
        assert encode_score(record, rubric()) == encode_score(validated, rubric())


def test_a_model_returning_no_probability_is_refused(tmp_path: Path, model_arrays: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    registry = ModelRegistry(tmp_path)
    registry.publish("distilled", *model_arrays, promote=True)
    scorer = DistilledScorer(registry, rubric(), poll_s=60)
    assert scorer.live is not None or scorer.maybe_reload(force=True)
    live = scorer.live
    assert live is not None
    monkeypatch.setattr(live.model, "predict_proba", lambda x: np.full((x.shape[0], len(live.model.item_ids)),
                                                                       np.nan))
    with pytest.raises(ValueError, match="probabilities outside"):
        scorer.score_batch([convo("n", "hi")])
