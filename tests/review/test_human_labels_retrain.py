"""Retraining reads human labels: where a person answered an item, the person's answer is the training label."""

from __future__ import annotations

from pathlib import Path

import pytest

import distill.retrain as retrain
from distill.human_labels import HumanLabel, HumanLabelStore, with_human_answers
from distill.store import LabelStore
from monitor.contracts.settings import load_settings
from tests.review.stored import ITEM, RUBRIC, store_judged


def test_a_person_wins_over_the_judge_in_the_training_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    store_judged(url, 4)  # the judge said yes for user0 and user2 on ITEM
    store = LabelStore(url)
    HumanLabelStore(store).upsert([
        HumanLabel(conversation_id="user0@example.com", item_id=ITEM, answer="no"),
        HumanLabel(conversation_id="user1@example.com", item_id=ITEM, answer="yes"),
        HumanLabel(conversation_id="user1@example.com", item_id="overall", answer="dsat")])
    seen: list[dict[str, bool | None]] = []

    def capture(records, rubric):  # type: ignore[no-untyped-def]
        seen.append({r.conversation_id: r.verdicts()[ITEM] for r in records})
        raise RuntimeError("captured")

    monkeypatch.setattr(retrain, "dataset_from_records", capture)
    with pytest.raises(RuntimeError, match="captured"):
        retrain.retrain_once(load_settings(label_store_url=url, retrain_min_labels=10).distill.model_copy(
            update={"retrain_min_labels": 1}), store, None, RUBRIC)  # type: ignore[arg-type]  # no registry needed
    assert seen == [{"user0@example.com": False, "user1@example.com": True, "user2@example.com": True,
                     "user3@example.com": False}]
    records = store.fetch()
    assert with_human_answers(records, []) is records
    store.close()
