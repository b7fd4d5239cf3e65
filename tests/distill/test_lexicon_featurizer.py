from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from distill.featurizers.lexicon import FEATURES, LexiconFeaturizer, conversation_cues
from distill.featurizers.spec import featurizer_config, featurizer_from_config, featurizer_name, make_featurizer
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, Turn


def conv(cid: str, *turns: tuple[str, str]) -> Conversation:
    return Conversation(conversation_id=cid, turns=[Turn(index=i, role=r, text=t) for i, (r, t) in enumerate(turns)])


LATE = conv("late", ("user", "I need a train?"), ("assistant", "Sorry, there is none."), ("user", "no, not that one"),
            ("assistant", "Which day?"), ("user", "Friday"), ("assistant", "Booked."),
            ("user", "great, thanks! Perfect."), ("assistant", "Unfortunately I cannot add a taxi."))


def test_cues_count_user_words_and_the_answers_each_user_turn_gets() -> None:
    cues = dict(zip(FEATURES, conversation_cues(LATE), strict=True))
    assert cues["log_user_turns"] == 4 and cues["log_user_words_per_turn"] == (4 + 4 + 1 + 3) / 4
    assert (cues["questions"], cues["thanks"], cues["praise"], cues["negative"]) == (1, 1, 2, 2)
    assert cues["assistant_apologies"] == 3  # sorry; unfortunately and cannot (the answer after the last user turn)
    # the opening (first three user turns) leaves out the last turn's thanks and praise and the answer after it
    assert (cues["early_questions"], cues["early_thanks"], cues["early_praise"], cues["early_negative"],
            cues["early_assistant_apologies"]) == (1, 0, 0, 2, 1)


def test_assistant_apologies_are_not_user_negatives() -> None:
    cues = dict(zip(FEATURES, conversation_cues(conv("a", ("user", "hi"), ("assistant", "sorry, I can't"))),
                    strict=True))
    assert cues["negative"] == 0 and cues["assistant_apologies"] == 2


def test_columns_are_scaled_log_counts_and_the_weight_multiplies_them() -> None:
    X = LexiconFeaturizer().transform([LATE, conv("b", ("assistant", "hello"))])
    assert X.shape == (2, 12) and X.dtype == np.float32
    np.testing.assert_allclose(X[0], 3 * np.log1p(conversation_cues(LATE)) / 3, rtol=1e-6)
    np.testing.assert_allclose(X[1], 0, atol=0)  # no user turn: nothing to count
    np.testing.assert_allclose(LexiconFeaturizer(weight=1).transform([LATE]), X[:1] / 3, rtol=1e-6)
    with pytest.raises(ConfigError, match="'weight' parameter of LexiconFeaturizer must be a float >= 0"):
        LexiconFeaturizer(weight=-1).transform([LATE])
    with pytest.raises(ConfigError, match="expects a list of Conversation objects"):
        LexiconFeaturizer().transform("not a list")  # type: ignore[arg-type]


def test_hashing_plus_lexicon_trains_and_serves_from_arrays(tmp_path: Path) -> None:
    """What `convmon distill train --featurizer hashing+lexicon` builds rebuilds in a worker from its manifest
    (weight included) and scores the same."""
    from distill.registry import ModelRegistry
    from distill.train import train_items
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.contracts.settings import REPO_ROOT
    from monitor.stages.classify import load_live
    from tests.support.model_fixtures import simulated_training_set

    rubric = load_rubric_set("spur-copilot", REPO_ROOT / "prompts")
    data = simulated_training_set(rubric, n=120)
    union = featurizer_from_config({"parts": [{"name": "hashing"}, {"name": "lexicon", "params": {"weight": 2.0}}]})
    trained = train_items(data, union, rubric=rubric, min_positives=5)
    assert featurizer_name(trained.featurizer) == "hashing+lexicon"
    assert trained.model.featurizer["parts"][1] == {"name": "lexicon", "params": {"weight": 2.0}}
    registry = ModelRegistry(tmp_path)
    version = registry.publish("distilled", trained.model.to_arrays(), json.loads(json.dumps(
        trained.model.manifest())), promote=True)
    live = load_live(registry, rubric, version, kind="distilled")
    X = union.transform(data.conversations)
    np.testing.assert_allclose(live.model.predict_proba(live.featurizer.transform(data.conversations)),
                               trained.model.predict_proba(X), rtol=1e-6)
    assert featurizer_config(make_featurizer("hashing+lexicon"))["parts"][1]["params"] == {"weight": 3.0}
