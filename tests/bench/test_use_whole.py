"""The DSAT protocol of ``bench use`` and the turn-level model: structure, selection inside the training split,
and that no test conversation's turn ratings are read."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.doc_use_dsat import dsat_markdown
from bench.use import quick_config, run_use
from bench.use_agreement import panel_agreement
from bench.use_whole import TURN_MODEL, DsatConfig, _turn_classes, dsat_rows
from distill.datasets import load_uss
from distill.datasets.uss import UssDialogue, UssTurn
from distill.featurizers.hashing import HashingFeaturizer
from distill.turn_level import TurnAggregateClassifier, aggregate, turn_rows
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, Turn

SMALL = HashingFeaturizer(n_word_features=2**10, n_char_features=2**10, n_context_features=2**8,
                          n_last_features=2**8)


def test_first_aggregation_is_the_probability_that_the_first_polar_turn_is_dsat() -> None:
    # turn probabilities (sat, neutral, dsat) of one conversation's three user turns
    p = np.array([[0.2, 0.7, 0.1], [0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    expected = 0.1 + 0.7 * 0.2 + 0.7 * 0.3 * 0.8
    got = aggregate(p, np.zeros(3, dtype=int), 1, "first")
    assert got[0] == pytest.approx(expected)
    assert aggregate(p, np.zeros(3, dtype=int), 1, "max")[0] == pytest.approx(0.8)
    assert aggregate(p, np.zeros(3, dtype=int), 1, "noisy_or")[0] == pytest.approx(1 - 0.9 * 0.8 * 0.2)
    # a conversation without user turns scores 0; owners need not be sorted
    mixed = aggregate(np.vstack([p[2], p[0]]), np.array([2, 0]), 3, "first")
    assert mixed.tolist() == pytest.approx([0.1, 0.0, 0.8])
    with pytest.raises(ConfigError, match="aggregation"):
        aggregate(p, np.zeros(3, dtype=int), 1, "median")


def test_turn_rows_pair_each_user_turn_with_the_assistant_text_it_answers() -> None:
    c = Conversation(conversation_id="c", turns=[Turn(index=0, role="user", text="book a table"),
                                                 Turn(index=1, role="assistant", text="which day?"),
                                                 Turn(index=2, role="user", text="friday")])
    rows = turn_rows([c, c], [[1, 2], [0, 1]])
    assert rows.X.shape[0] == 4 and rows.owner.tolist() == [0, 0, 1, 1] and rows.polarity.tolist() == [1, 2, 0, 1]
    assert turn_rows([c]).polarity.tolist() == [-1, -1]  # unlabelled: what scoring sees
    silent = Conversation(conversation_id="a", turns=[Turn(index=0, role="assistant", text="hello?")])
    held = turn_rows([c, silent]).take(np.array([1, 0]))  # a conversation without user turns has no rows
    assert held.owner.tolist() == [1, 1]
    with pytest.raises(ConfigError, match="2 user turns"):
        turn_rows([c], [[1]])


@pytest.fixture(scope="module")
def mwoz(shared_data: Path) -> list:  # type: ignore[type-arg]
    return load_uss(shared_data / "uss" / "MWOZ.txt")[:160]


def test_test_conversations_turn_ratings_are_never_read(mwoz: list) -> None:  # type: ignore[type-arg]
    """Scrambling the turn labels of held-out conversations changes no prediction; scrambling the training
    conversations' labels does (so the check can fail)."""
    dialogues = mwoz[:80]
    rows = turn_rows([d.to_conversation() for d in dialogues], [_turn_classes(d, cut=False)[0] for d in dialogues],
                     featurizer=SMALL)
    y = np.array([d.label == "DSAT" for d in dialogues], dtype=int)
    train, test = np.arange(0, 60), np.arange(60, 80)
    rng = np.random.default_rng(0)
    model = TurnAggregateClassifier(aggregations=("first", "mean")).fit(rows.take(train), y[train])
    held = rows.take(test)
    blind = held.__class__(held.X, held.owner, rng.integers(-1, 3, len(held.polarity)))
    assert model.predict_proba(held, len(test)).tolist() == model.predict_proba(blind, len(test)).tolist()
    part = rows.take(train)
    scrambled = part.__class__(part.X, part.owner, rng.integers(0, 3, len(part.polarity)))
    other = TurnAggregateClassifier(aggregations=("first", "mean")).fit(scrambled, y[train])
    assert other.predict_proba(held, len(test)).tolist() != model.predict_proba(held, len(test)).tolist()


@pytest.mark.long
def test_dsat_rows_measure_both_inputs_and_select_inside_the_training_split(mwoz: list) -> None:  # type: ignore[type-arg]
    rows = dsat_rows(mwoz, "MWOZ", DsatConfig(splits=2))
    got = {(r["input"], r["model"]): r for r in rows}
    assert set(got) == {("cut", "served"), ("whole", "served"), ("whole", TURN_MODEL), ("whole", "selected")}
    for r in rows:
        assert 0 <= r["roc_auc"] <= 1 and len(r["roc_auc_per_split"]) == 2 and r["positives"] == sum(
            d.label == "DSAT" for d in mwoz)
        assert 0 <= r["rate_error"] <= r["rate_error_max"] <= 100
    selected, served, turns = got[("whole", "selected")], got[("whole", "served")], got[("whole", "turn-aggregate")]
    for k, pick in enumerate(selected["chosen"]):  # each split's pick is the model the training-split CV preferred
        assert selected["roc_auc_per_split"][k] == got[("whole", pick["model"])]["roc_auc_per_split"][k]
    assert served["score_cpu_ms_per_conversation"] > 0 and turns["score_cpu_ms_per_conversation"] > 0
    text = "\n".join(dsat_markdown({"dsat": rows, "dsat_panel_agreement": [panel_agreement(mwoz, "MWOZ", splits=2)]}))
    assert "| MWOZ | whole | selected |" in text and "judged on the `selected` row" in text
    assert "| MWOZ | 160 | 0." in text and "half panel vs half panel ROC-AUC" in text


@pytest.mark.long
def test_quick_config_runs_both_protocols(shared_data: Path) -> None:
    """Two data sets in two processes (n_jobs=2, the CLI's default) give the rows one process would."""
    config = quick_config(shared_data, datasets=["CCPE", "MWOZ"], models=["majority"], splits=2, limit=120, n_jobs=2)
    out = run_use(config)
    assert {r["protocol"] for r in out["results"]} == {"table1"} and out["results"][0]["splits"] == 2
    assert [(r["dataset"], r["input"], r["model"]) for r in out["dsat"]] == [
        (d, i, m) for d in ("CCPE", "MWOZ") for i, m in (("cut", "served"), ("whole", "served"), ("whole", TURN_MODEL),
                                                          ("whole", "selected"))]
    serial = run_use(replace(config, datasets=["MWOZ"], n_jobs=1))["dsat"]
    assert [r["roc_auc_per_split"] for r in serial] == [r["roc_auc_per_split"] for r in out["dsat"][4:]]
    assert "SPUR Appendix B" in out["dsat_label_rule"]
    assert [r["dataset"] for r in out["dsat_panel_agreement"]] == ["CCPE", "MWOZ"]


def _dialogue(did: str, *ratings: tuple[int, ...]) -> UssDialogue:
    return UssDialogue(did, tuple(UssTurn("user", f"turn {i}", ratings=r) for i, r in enumerate(ratings)))


def test_panel_agreement_is_one_when_annotators_agree_and_chance_when_one_half_is_noise() -> None:
    rng = np.random.default_rng(0)
    agreeing = [_dialogue(str(i), (3, 3, 3, 3), (r,) * 4) for i, r in enumerate(rng.choice([2, 4], 200))]
    assert panel_agreement(agreeing, "agree", splits=3)["roc_auc"] == 1.0
    # annotator 0 and 1 always rate alike, 2 and 3 at random: the label of one half says little of the other's
    noise = [_dialogue(str(i), (a, a, *rng.choice([2, 4], 2))) for i, a in enumerate(rng.choice([2, 4], 400))]
    got = panel_agreement(noise, "noise", splits=5)
    assert got["dialogues"] == 400 and got["roc_auc_min"] <= got["roc_auc"] <= got["roc_auc_max"]
    assert 0.3 < got["roc_auc"] < 0.75
    one_label = panel_agreement(agreeing[:1], "one", splits=2)  # a single dialogue: no AUC, no crash
    assert one_label["roc_auc"] is None and one_label["splits"] == 0


def test_panel_agreement_on_mwoz_is_far_below_the_bar(mwoz: list) -> None:  # type: ignore[type-arg]
    """The reference the docs compare the models with: two halves of USS's own annotators."""
    got = panel_agreement(mwoz, "MWOZ", splits=5)
    assert 0.5 < got["roc_auc"] < 0.7
