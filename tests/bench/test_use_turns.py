"""The turn-supervised USE model reads turn labels of its training conversations only, and chooses by grouped CV."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from bench.use import LABELS, UseConfig, featurizer, run_use, split_indices
from bench.use_turns import TurnData, TurnSupervisedClassifier, build_turn_data, candidates, turn_model
from distill.datasets import load_uss
from distill.datasets.uss import _turn_polarity, conversation_label
from distill.featurizers.hashing import HashingFeaturizer

SMALL = HashingFeaturizer(n_word_features=2**10, n_char_features=2**10, n_context_features=2**8,
                          n_last_features=2**8)


@pytest.fixture(scope="module")
def sgd(shared_data: Path) -> tuple[TurnData, np.ndarray]:
    dialogues = load_uss(shared_data / "uss" / "SGD.txt")[:160]
    y = np.array([LABELS.index(d.label) for d in dialogues])
    X_conv = SMALL.transform([d.to_conversation(cut=True) for d in dialogues])
    return build_turn_data(dialogues, X_conv, SMALL.transform), y


def _grid() -> list[Any]:
    return candidates([0.1, 1.0], class_weights=("balanced",))


def test_turn_examples_are_the_rated_user_turns_before_the_cut(shared_data: Path,
                                                                sgd: tuple[TurnData, np.ndarray]) -> None:
    data, _ = sgd
    dialogues = load_uss(shared_data / "uss" / "SGD.txt")[:160]
    expected = [LABELS.index(_turn_polarity(t.ratings)) for d in dialogues
                for t in d.turns[: conversation_label(d)[1]] if t.role == "user" and t.ratings and not t.empty]
    assert data.turn_label.tolist() == expected
    assert data.X_turns["prefix"].shape[0] == data.X_turns["turn"].shape[0] == len(expected)
    # on each cut conversation every polar turn agrees with the conversation label (that is what the cut does)
    for row, d in enumerate(dialogues):
        polar = {LABELS[v] for v in data.turn_label[data.group == row]} - {"NEUTRAL"}
        assert polar <= {d.label}
        assert LABELS[data.prefix_label[data.group == row][-1]] == d.label


def test_test_conversations_turn_labels_are_never_read(sgd: tuple[TurnData, np.ndarray]) -> None:
    """Scrambling every turn label of the test conversations changes neither the selection nor a prediction;
    scrambling those of the training conversations does (so the check can fail)."""
    data, y = sgd
    train, test = split_indices(len(y), train_fraction=0.25, test_fraction=0.6, seed=1)
    rng = np.random.default_rng(0)

    def scrambled(rows: np.ndarray) -> TurnData:
        mask = np.isin(data.group, rows)
        turn, prefix = data.turn_label.copy(), data.prefix_label.copy()
        turn[mask], prefix[mask] = rng.integers(0, 3, mask.sum()), rng.integers(0, 3, mask.sum())
        return replace(data, turn_label=turn, prefix_label=prefix)

    def fit(d: TurnData) -> TurnSupervisedClassifier:
        return TurnSupervisedClassifier(d, _grid(), seed=0).fit(train[:, None], y[train])

    reference = fit(data)
    assert len({round(s, 6) for s in reference.cv_scores_.values()}) > 1  # candidates do differ
    blind = fit(scrambled(test))
    assert blind.cv_scores_ == reference.cv_scores_ and blind.selected_ == reference.selected_
    assert (blind.predict(test[:, None]) == reference.predict(test[:, None])).all()
    assert fit(scrambled(train)).cv_scores_ != reference.cv_scores_


class Recording(TurnSupervisedClassifier):
    """Records which conversations each fit trains on and each prediction scores."""

    def _fit_candidate(self, c: Any, conversations: np.ndarray, y: np.ndarray) -> Any:
        self.calls.append(("fit", set(conversations.tolist())))
        return super()._fit_candidate(c, conversations, y)

    def _predict_candidate(self, c: Any, model: Any, conversations: np.ndarray, seen: np.ndarray) -> np.ndarray:
        self.calls.append(("predict", set(conversations.tolist())))
        return super()._predict_candidate(c, model, conversations, seen)


def test_selection_is_cv_grouped_by_conversation_within_the_training_split(sgd: tuple[TurnData, np.ndarray]
                                                                           ) -> None:
    data, y = sgd
    train = split_indices(len(y), train_fraction=0.3, test_fraction=0.6, seed=2)[0]
    model = Recording(data, _grid(), folds=4, seed=0)
    model.calls = []
    model.fit(train[:, None], y[train])
    fits = [s for kind, s in model.calls if kind == "fit"]
    assert all(s <= set(train.tolist()) for s in fits)
    assert fits[-1] == set(train.tolist())  # the refit of the chosen candidate: the whole training split
    held_out: set[int] = set()
    last_fit: set[int] = set()
    for kind, conversations in model.calls:
        if kind == "fit":
            last_fit = conversations
        else:  # each fold predicts conversations whose turns its model never trained on
            assert not conversations & last_fit
            held_out |= conversations
    assert held_out == set(train.tolist())  # every training conversation is held out once
    assert model.selected_ == max(model.grid, key=lambda c: model.cv_scores_[c])


def test_run_use_reports_the_turn_model_and_what_cv_chose(shared_data: Path) -> None:
    out = run_use(UseConfig(data_dir=shared_data, datasets=["SGD"], models=["majority", "hashing+turns"], splits=2,
                            curve=[], limit=200, train_fraction=0.1, test_fraction=0.6, Cs=(1.0,)))
    row = next(r for r in out["results"] if r["model"] == "hashing+turns")
    assert row["features"] == "hashing" and 0 <= row["weighted_f1"] <= 100 and len(row["selected"]) == 2
    assert {s["source"] for s in row["selected"]} <= {"conversations", "turns", "both"}
    assert all(0 <= s["cv_weighted_f1"] <= 100 for s in row["selected"])
    assert "turn-supervised" in out["models"]["turns"]
    assert len(row["weighted_f1_per_split"]) == 2  # the per-split scores that paired comparisons use
    assert np.mean(row["weighted_f1_per_split"]) == pytest.approx(row["weighted_f1"], abs=0.01)


def test_repeated_cv_averages_reshuffled_folds(sgd: tuple[TurnData, np.ndarray]) -> None:
    data, y = sgd
    train = split_indices(len(y), train_fraction=0.3, test_fraction=0.6, seed=3)[0]
    grid = candidates([1.0], sources=("turns",), contexts=("turn",), class_weights=("balanced",))
    once = [TurnSupervisedClassifier(data, grid, seed=s).fit(train[:, None], y[train]).cv_scores_ for s in (0, 1)]
    twice = TurnSupervisedClassifier(data, grid, repeats=2, seed=0).fit(train[:, None], y[train]).cv_scores_
    assert once[0] != once[1]  # other folds, other scores: the repeat is not a copy
    assert twice == pytest.approx({c: (once[0][c] + once[1][c]) / 2 for c in grid})


def test_bench_use_featurizes_each_context_of_its_own(shared_data: Path) -> None:
    """Regression: a featurize function sharing one cache returned the prefix rows again for the turn context."""
    dialogues = load_uss(shared_data / "uss" / "SGD.txt")[:20]
    featurize = featurizer("hashing")
    conversations = [d.to_conversation(cut=True) for d in dialogues]
    X, factory = turn_model(dialogues, featurize(conversations), featurize, [1.0], seed=0)
    turns = factory.data.X_turns
    assert X.ravel().tolist() == list(range(20)) and turns["prefix"].shape == turns["turn"].shape
    assert (turns["prefix"] != turns["turn"]).nnz > 0
    assert (turns["turn"][0] != turns["prefix"][0]).nnz == 0  # the first prefix is its own last turn


@pytest.mark.parametrize("spec", ["minilm", "hashing+minilm"])
def test_turn_model_on_embedding_features(shared_data: Path, spec: str) -> None:
    """``minilm+turns`` (dense rows, stacked with np.vstack) and ``hashing+minilm+turns`` (sparse and dense
    columns side by side): turn examples carry the spec's columns; the dense model fits and predicts on them."""
    dialogues = load_uss(shared_data / "uss" / "SGD.txt")[:40]
    y = np.array([LABELS.index(d.label) for d in dialogues])
    featurize = featurizer(spec)
    X_conv = featurize([d.to_conversation(cut=True) for d in dialogues])
    X, factory = turn_model(dialogues, X_conv, featurize, [1.0], seed=0)
    turns = factory.data.X_turns
    assert turns["turn"].shape[1] == turns["prefix"].shape[1] == X_conv.shape[1]
    width = 3 * 384  # MiniLM: mean and max of the user turns, mean of their contexts
    assert X_conv.shape[1] == width if spec == "minilm" else X_conv.shape[1] > width
    assert (turns["turn"] != turns["prefix"]).sum() > 0  # the contexts differ here too
    if spec != "minilm":
        assert sp.issparse(turns["turn"]) and sp.issparse(X_conv)  # fitted as hashing+turns is (slow here)
        return
    model = factory().fit(X[:30], y[:30])
    assert {c.source for c in model.cv_scores_} == {"conversations", "turns", "both"}  # the whole grid was scored
    assert set(model.predict(X[30:]).tolist()) <= set(y[:30].tolist())
