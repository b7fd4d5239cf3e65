"""DistilledScorer: records from the live model, rubric-key refusal, polling, hot swap under load."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from distill.registry import ModelRegistry
from distill.train import TrainingSet, train_items
from monitor.contracts.events import Conversation, Feedback, Turn
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.score_codec import encode_score
from monitor.contracts.scores import ScoreRecord, aggregate_r
from monitor.contracts.settings import REPO_ROOT
from monitor.stages.classify import DistilledScorer

PHRASES = {"sat.gratitude": ["thanks so much", "thank you, that helps"],
           "dsat.negative_feedback": ["that is wrong", "this answer is useless"]}
TOPICS = ["how do I bake bread", "what is the capital of peru", "explain recursion", "plan a trip to rome"]


def rubric() -> RubricSet:
    return load_rubric_set("spur-copilot", REPO_ROOT / "prompts")


def convo(cid: str, *user: str) -> Conversation:
    turns = [Turn(index=2 * i + j, role=r, text=t if r == "user" else "an answer")
             for i, t in enumerate(user) for j, r in enumerate(("user", "assistant"))]
    return Conversation(conversation_id=cid, turns=turns, metadata={"app": "web"}, feedback=Feedback(thumbs="up"))


@pytest.fixture(scope="module")
def model_arrays():
    rub = rubric()
    rng = random.Random(0)
    conversations, labels = [], []
    for k in range(160):
        present = [i for i in PHRASES if rng.random() < 0.4]
        conversations.append(convo(f"t{k}", rng.choice(TOPICS), *(rng.choice(PHRASES[i]) for i in present)))
        labels.append([float(item in present) for item in rub.item_ids])
    data = TrainingSet(conversations, np.array(labels), rub.item_ids, np.array([c.conversation_id for c in
                                                                                 conversations], dtype=object))
    trained = train_items(data, "hashing", rubric=rub, Cs=(1.0,))
    return trained.model.to_arrays(), trained.model.manifest()


def test_no_live_model_means_unscored(tmp_path: Path) -> None:
    scorer = DistilledScorer(ModelRegistry(tmp_path), rubric(), poll_s=0)
    assert scorer.score_batch([convo("a", "hi")]) is None and scorer.model_version is None


def test_records_carry_version_probabilities_and_r(tmp_path: Path, model_arrays) -> None:
    registry = ModelRegistry(tmp_path)
    version = registry.publish("distilled", *model_arrays, promote=True)
    scorer = DistilledScorer(registry, rubric(), poll_s=60)
    happy, angry = convo("h", "explain recursion", "thanks so much"), convo("x", "explain recursion", "that is wrong")
    records = scorer.score_batch([happy, angry], shadow_flags=[True, False])
    assert records is not None and [r.conversation_id for r in records] == ["h", "x"]
    h, x = records
    assert (h.scorer, h.judge, h.model_version, h.rubric_set) == ("distilled", "hashing", version, "spur-copilot")
    assert h.shadow and not x.shadow and h.metadata == {"app": "web"} and h.feedback == {"thumbs": "up"}
    assert [i.item_id for i in h.items] == ["sat.gratitude", "dsat.negative_feedback"]  # only trained items
    p = {r.conversation_id: {i.item_id: i.probability for i in r.items} for r in records}
    assert p["h"]["sat.gratitude"] > 0.7 > p["x"]["sat.gratitude"]
    assert p["x"]["dsat.negative_feedback"] > 0.7 > p["h"]["dsat.negative_feedback"]
    assert h.items[0].verdict is True and x.items[0].verdict is False
    assert abs(h.R - aggregate_r(h.items)) < 1e-9 and h.R > 0 > x.R
    assert scorer.score_batch([]) == []


def test_unvalidated_records_are_valid_and_encode_as_validated_ones(tmp_path: Path, model_arrays) -> None:
    """The scorer builds records without pydantic validation (hot path CPU): each one validates back to itself
    and has the same bytes on the scores topic; probabilities out of [0, 1] are refused for the whole batch."""
    registry = ModelRegistry(tmp_path)
    registry.publish("distilled", *model_arrays, promote=True)
    scorer = DistilledScorer(registry, rubric(), poll_s=60)
    span = "0" * 31 + "1-" + "a" * 16
    traced = Conversation(conversation_id="s", turns=[Turn(index=0, role="user", text="thanks so much"),
                                                      Turn(index=1, role="assistant", text="ok", span=span,
                                                           response_id="r-1")], ended_at=1.7e9)
    conversations = [convo(f"c{k}", rng_topic, "thanks so much") for k, rng_topic in enumerate(TOPICS)] + [traced]
    records = scorer.score_batch(conversations, shadow_flags=[k % 2 == 0 for k in range(len(conversations))],
                                 sample_weights=[1.0, 4.0, 0.5, 1.0, 2.0])
    assert records is not None and records[-1].span == span and records[-1].response_id == "r-1"
    for record in records:
        validated = ScoreRecord.model_validate(record.model_dump())
        assert validated == record and encode_score(validated, rubric()) == encode_score(record, rubric())
    assert records[0].metadata is not conversations[0].metadata  # the record does not share the session's dict
    live = scorer.live
    assert live is not None
    live.model.predict_proba = lambda x: np.full((len(conversations), len(live.model.item_ids)), np.nan)
    with pytest.raises(ValueError, match="outside"):
        scorer.score_batch(conversations)
    with pytest.raises(ValueError, match="sample weights"):
        DistilledScorer(registry, rubric(), poll_s=60).score_batch(conversations[:1], sample_weights=[0.0])


def test_refuses_a_model_for_another_rubric_set(tmp_path: Path, model_arrays) -> None:
    registry = ModelRegistry(tmp_path)
    arrays, manifest = model_arrays
    registry.publish("distilled", arrays, {**manifest, "rubric_key": "spur-copilot@0"}, promote=True)
    scorer = DistilledScorer(registry, rubric(), poll_s=0)
    assert scorer.maybe_reload() is False and scorer.score_batch([convo("a", "hi")]) is None
    good = registry.publish("distilled", arrays, manifest, promote=True)
    assert scorer.maybe_reload() is True and scorer.model_version == good


def test_polls_at_most_every_poll_s(tmp_path: Path, model_arrays) -> None:
    registry = ModelRegistry(tmp_path)
    now = [100.0]
    scorer = DistilledScorer(registry, rubric(), poll_s=10, clock=lambda: now[0])
    first = registry.publish("distilled", *model_arrays, promote=True)
    assert scorer.maybe_reload() and scorer.model_version == first
    second = registry.publish("distilled", *model_arrays, promote=True)
    now[0] += 5
    assert not scorer.maybe_reload() and scorer.model_version == first  # too soon: no registry read
    now[0] += 6
    assert scorer.maybe_reload() and scorer.model_version == second
    assert not scorer.maybe_reload(force=True)  # unchanged LIVE: nothing to load


def test_hot_swap_under_load_scores_everything_exactly_once(tmp_path: Path, model_arrays) -> None:
    registry = ModelRegistry(tmp_path)
    first = registry.publish("distilled", *model_arrays, promote=True)
    scorer = DistilledScorer(registry, rubric(), poll_s=0)
    conversations = [convo(f"c{i}", random.Random(i).choice(TOPICS), "thanks so much") for i in range(3000)]
    published: list[str] = []
    go = threading.Event()

    def publisher() -> None:
        go.wait()
        published.append(registry.publish("distilled", *model_arrays))  # written first ...
        registry.promote("distilled", published[0])  # ... then made live while batches are in flight

    thread = threading.Thread(target=publisher)
    thread.start()
    seen: list[tuple[str, str]] = []
    late = [convo(f"late{i}", "thanks so much") for i in range(50)]  # scored after the publisher is done
    for n, start in enumerate([*range(0, 3000, 50), None]):
        if n == 5:
            go.set()
        if start is None:
            thread.join()
        records = scorer.score_batch(late if start is None else conversations[start : start + 50])
        assert records is not None
        seen += [(r.conversation_id, r.model_version) for r in records]
    ids = [cid for cid, _ in seen]
    assert len(ids) == len(set(ids)) == 3050  # nothing lost, nothing twice
    versions = [v for _, v in seen]
    switch = versions.index(published[0])
    assert set(versions[:switch]) == {first} and set(versions[switch:]) == {published[0]} and switch > 0


def test_pipeline_counts_batch_sizes_and_service_time(tmp_path: Path, model_arrays) -> None:
    """The batch histograms tell an operator whether batches fill (load) and what a batch costs."""
    from prometheus_client import CollectorRegistry

    from monitor.contracts.settings import Settings
    from monitor.runtime.wiring import build_pipeline

    settings = Settings(model_registry=tmp_path / "models", label_store_url=f"sqlite:///{tmp_path}/l.db",
                        sample_rate=0.0, registry_poll_s=0.001)
    registry = CollectorRegistry()
    pipeline = build_pipeline(settings, registry=registry)
    assert pipeline.classify([convo("a", "hi")]) == []  # no model yet: unscored, no batch observed
    assert registry.get_sample_value("convmon_classify_batch_conversations_count") == 0
    ModelRegistry(settings.model_registry).publish("distilled", *model_arrays, promote=True)
    time.sleep(0.01)  # past registry_poll_s: the next batch picks the model up
    assert len(pipeline.classify([convo(f"c{i}", "thanks so much") for i in range(5)])) == 5
    assert len(pipeline.classify([convo("d", "that is wrong")])) == 1
    assert registry.get_sample_value("convmon_classify_batch_conversations_count") == 2
    assert registry.get_sample_value("convmon_classify_batch_conversations_sum") == 6
    assert registry.get_sample_value("convmon_classify_batch_conversations_bucket", {"le": "4.0"}) == 1
    assert registry.get_sample_value("convmon_classify_batch_duration_seconds_sum") > 0
