"""``<featurizer>+turns`` in ``bench use``: a conversation classifier supervised by the USS *turn* ratings.

SPUR's protocol trains on 5 % of the conversations (about 50) but any granularity of their labels may be
used, and every training conversation has about 7 rated user turns: 20x more labels than its one
conversation label. Each rated user turn of a training conversation becomes an example, its text in
dialogue context (the conversation prefix up to that turn, or the turn alone with the assistant text it
answers), labelled by the rule the conversation label is built from (:func:`_turn_polarity` on the
annotator mean: ``turn``) or by that rule applied to the prefix (the first polar turn so far: ``prefix``,
which on the whole cut conversation *is* the conversation label). A test conversation is predicted
from its whole cut conversation (``whole``) or by averaging the turn predictions over its turns (``mean``).

Which of these (conversation labels only, turn labels, or both; target; context; class weighting; C;
aggregation) is chosen by cross-validation grouped by conversation on the training split alone,
maximising the weighted F1 of the held-out conversations' labels. The estimator sees the dataset's
turn labels through :class:`TurnData` but reads only the rows of the conversations it is fitted on.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold
from sklearn.multiclass import OneVsRestClassifier

from distill.datasets.uss import UssDialogue, _turn_polarity, conversation_label, rated_prefixes
from monitor.contracts.events import Conversation

LABELS = ("SAT", "DSAT", "NEUTRAL")  # as in use.py, which imports this module
TURNS = "+turns"  # model-name suffix: ``hashing+turns`` is this classifier on hashing features
_NEUTRAL = LABELS.index("NEUTRAL")
Featurize = Callable[[list[Conversation]], Any]


@dataclass(frozen=True)
class TurnData:
    """Every rated user turn of a dataset: ``group`` (conversation row), labels, and features per context.

    ``X_conv`` featurizes the whole cut conversations (the rows of ``bench use``), ``X_turns[context]`` the
    turn examples; ``turn_label`` / ``prefix_label`` index LABELS."""

    group: np.ndarray
    turn_label: np.ndarray
    prefix_label: np.ndarray
    X_conv: Any
    X_turns: dict[str, Any]


def _last_turn(prefix: Conversation) -> Conversation:
    """The prefix's last user turn with the assistant turns just before it."""
    turns = prefix.turns
    start = len(turns) - 1
    while start > 0 and turns[start - 1].role == "assistant":
        start -= 1
    return prefix.model_copy(update={"turns": turns[start:]})


def build_turn_data(dialogues: Sequence[UssDialogue], X_conv: Any, featurize: Featurize) -> TurnData:
    """Turn examples of the dialogues cut as their conversation labels are (SPUR Appendix B)."""
    group, turn_label, prefix_label, prefixes = [], [], [], []
    for row, dialogue in enumerate(dialogues):
        cut = replace(dialogue, turns=dialogue.turns[: conversation_label(dialogue)[1]])
        first = "NEUTRAL"
        for prefix, turn in rated_prefixes(cut):
            polarity = _turn_polarity(turn.ratings)
            first = polarity if first == "NEUTRAL" else first
            group.append(row)
            turn_label.append(LABELS.index(polarity))
            prefix_label.append(LABELS.index(first))
            prefixes.append(prefix)
    X_turns = {"prefix": featurize(prefixes), "turn": featurize([_last_turn(p) for p in prefixes])}
    return TurnData(np.array(group), np.array(turn_label), np.array(prefix_label), X_conv, X_turns)


@dataclass(frozen=True)
class Candidate:
    source: str  # "conversations", "turns" or "both"
    target: str  # "turn" or "prefix" (ignored for "conversations")
    context: str  # "prefix" or "turn"
    class_weight: str | None
    C: float
    predict: str  # "whole" or "mean"


def candidates(Cs: Sequence[float], sources: Sequence[str] = ("conversations", "turns", "both"),
               targets: Sequence[str] = ("turn",), contexts: Sequence[str] = ("prefix", "turn"),
               class_weights: Sequence[str | None] = ("balanced", None),
               predicts: Sequence[str] = ("whole", "mean")) -> list[Candidate]:
    """The grid, the distill recipe (conversation labels, balanced) first so that it wins ties.

    The ``prefix`` target is off by default: the target is the turn's own polarity, and every
    extra candidate adds selection noise on ~50 conversations."""
    out = []
    for source, target, context, cw, C, predict in itertools.product(
            sources, targets, contexts, class_weights, Cs, predicts):
        if source == "conversations" and (target, context, predict) != (targets[0], "prefix", "whole"):
            continue  # one conversation example per conversation: target, context and aggregation do not apply
        out.append(Candidate(source, target, context, cw, C, predict))
    return out


def _fit(X: Any, y: np.ndarray, class_weight: str | None, C: float) -> Any:
    """liblinear's dual solver when there are fewer examples than features (a few hundred turns against ~10^5
    hashed features): the same L2 objective, and 20x faster than the primal, whose cost grows with the features."""
    lr = LogisticRegression(class_weight=class_weight, solver="liblinear", max_iter=2000, C=C,
                            dual=X.shape[0] < X.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OneVsRestClassifier(lr).fit(X, y)


def _proba(model: Any, X: Any) -> np.ndarray:
    """Probabilities over all of LABELS (zero for a class the model never saw)."""
    out = np.zeros((X.shape[0], len(LABELS)))
    out[:, model.classes_] = model.predict_proba(X) if len(model.classes_) > 1 else 1.0
    return out


class TurnSupervisedClassifier(ClassifierMixin, BaseEstimator):
    """Fit on conversation rows (``X`` = their row numbers in ``data``); choose a :class:`Candidate` by
    grouped CV on those rows only, refit it on all of them. ``selected_`` and ``cv_scores_`` say what won."""

    def __init__(self, data: TurnData, grid: Sequence[Candidate], folds: int = 5, repeats: int = 1,
                 seed: int = 0) -> None:
        self.data = data
        self.grid = grid
        self.folds = folds
        self.repeats = repeats  # CV repeated with reshuffled folds: steadier scores on ~50 conversations
        self.seed = seed

    def _rows(self, conversations: np.ndarray) -> np.ndarray:
        """The turn rows of these conversations: the only turn labels an estimator reads."""
        return np.flatnonzero(np.isin(self.data.group, conversations))

    def _fit_candidate(self, c: Candidate, conversations: np.ndarray, y: np.ndarray) -> Any:
        X, labels = [], []
        if c.source in ("turns", "both"):
            rows = self._rows(conversations)
            X.append(self.data.X_turns[c.context][rows])
            labels.append((self.data.turn_label if c.target == "turn" else self.data.prefix_label)[rows])
        if c.source in ("conversations", "both"):
            X.append(self.data.X_conv[conversations])
            labels.append(y)
        stacked = sp.vstack(X, format="csr") if sp.issparse(X[0]) else np.vstack(X)
        return _fit(stacked, np.concatenate(labels), c.class_weight, c.C)

    def _predict_candidate(self, c: Candidate, model: Any, conversations: np.ndarray, seen: np.ndarray
                           ) -> np.ndarray:
        if c.predict == "whole":
            proba = _proba(model, self.data.X_conv[conversations])
        else:
            rows = self._rows(conversations)
            turn_proba = _proba(model, self.data.X_turns[c.context][rows])
            position = np.full(self.data.X_conv.shape[0], -1)
            position[conversations] = np.arange(len(conversations))
            owner = position[self.data.group[rows]]
            proba = np.zeros((len(conversations), len(LABELS)))
            np.add.at(proba, owner, turn_proba)
            proba /= np.maximum(np.bincount(owner, minlength=len(conversations)), 1)[:, None]
        allowed = np.isin(np.arange(len(LABELS)), seen)
        if c.source != "conversations" and c.target == "turn":
            allowed[_NEUTRAL] = False  # a turn-polarity model says whether *a turn* is neutral, not a conversation
        proba[:, ~allowed] = -np.inf
        return np.asarray(proba.argmax(axis=1))

    def _out_of_fold(self, conversations: np.ndarray, y: np.ndarray, seen: np.ndarray, seed: int
                     ) -> dict[Candidate, np.ndarray]:
        """Every candidate's prediction of each conversation by a model that never saw its turns."""
        folds = StratifiedKFold(n_splits=min(self.folds, int(np.bincount(y).max())), shuffle=True, random_state=seed)
        with warnings.catch_warnings():  # a class seen once still goes to one fold; StratifiedKFold warns, fine
            warnings.simplefilter("ignore")
            splits = list(folds.split(conversations, y))
        predicted = {c: np.zeros(len(y), dtype=int) for c in self.grid}
        for train, held in splits:
            fitted: dict[tuple[Any, ...], Any] = {}
            for c in self.grid:
                key = (c.source, c.target, c.context, c.class_weight, c.C)
                if key not in fitted:
                    fitted[key] = self._fit_candidate(c, conversations[train], y[train])
                predicted[c][held] = self._predict_candidate(c, fitted[key], conversations[held], seen)
        return predicted

    def fit(self, X: np.ndarray, y: np.ndarray) -> TurnSupervisedClassifier:
        conversations, y = np.asarray(X).ravel().astype(int), np.asarray(y)
        seen = np.unique(y)
        scores: dict[Candidate, list[float]] = {c: [] for c in self.grid}
        for repeat in range(self.repeats):
            predicted = self._out_of_fold(conversations, y, seen, self.seed + repeat)
            for c in self.grid:
                scores[c].append(float(f1_score(y, predicted[c], average="weighted", zero_division=0)))
        self.cv_scores_ = {c: float(np.mean(v)) for c, v in scores.items()}
        self.selected_ = max(self.grid, key=lambda c: self.cv_scores_[c])  # first of the best: grid order
        self.model_ = self._fit_candidate(self.selected_, conversations, y)
        self.seen_ = seen
        self.classes_ = np.arange(len(LABELS))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self._predict_candidate(self.selected_, self.model_, np.asarray(X).ravel().astype(int), self.seen_)


class TurnModelFactory:
    """``bench use``'s estimator factory for ``<spec>+turns``; remembers its estimators to report what CV chose."""

    def __init__(self, data: TurnData, grid: Sequence[Candidate], seed: int) -> None:
        self.data, self.grid, self.seed = data, grid, seed
        self.made: list[TurnSupervisedClassifier] = []

    def __call__(self) -> TurnSupervisedClassifier:
        self.made.append(TurnSupervisedClassifier(self.data, self.grid, seed=self.seed))
        return self.made[-1]

    def selections(self) -> list[dict[str, Any]]:
        """The candidate each fitted estimator chose, with its grouped-CV weighted F1 (%), then forgets them."""
        out = [{**asdict(m.selected_), "cv_weighted_f1": round(100 * m.cv_scores_[m.selected_], 2)}
               for m in self.made if hasattr(m, "selected_")]
        self.made.clear()
        return out


def turn_model(dialogues: Sequence[UssDialogue], X_conv: Any, featurize: Featurize, Cs: Sequence[float],
               seed: int) -> tuple[np.ndarray, TurnModelFactory]:
    """(X, estimator factory) for ``<spec>+turns``: X holds conversation row numbers, the labels stay in the data."""
    return np.arange(len(dialogues))[:, None], TurnModelFactory(build_turn_data(dialogues, X_conv, featurize),
                                                                candidates(Cs), seed)
