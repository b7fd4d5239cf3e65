"""A conversation's DSAT probability from its user turns: turn-supervised, aggregated, Platt-calibrated.

On whole conversations the served recipe (one linear model on the whole conversation's features) is near
chance on the USS dialogue label (docs/benchmarks.md): the dissatisfied turn is often one turn in twenty, and
the label (SPUR Appendix B) is the polarity of the *first* non-neutral user turn. This estimator is the
cheapest model that follows that structure. Each user turn, with the assistant text it answers and its
position (user turn 1..9, 10+), is one example labelled by its annotator-mean polarity (SAT / NEUTRAL / DSAT);
a multinomial logistic regression gives each turn's P(sat), P(neutral), P(dsat); the conversation score
aggregates them; Platt scaling on cross-fitted scores of the training conversations maps the score to
P(conversation label = DSAT). Aggregations:

* ``first``: P(the first non-neutral turn is DSAT) = sum_t P_t(dsat) prod_{s<t} P_s(neutral), the label's rule
  with each turn's polarity uncertain;
* ``max``, ``noisy_or``, ``top3`` (mean of the 3 largest), ``mean``: of the turns' P(dsat).

C and the aggregation are chosen by cross-validation grouped by conversation on the training conversations
(ROC-AUC of the conversation label); turn ratings supervise training only, never prediction.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

from distill.featurizers.hashing import HashingFeaturizer
from distill.model import sigmoid
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, Turn

AGGREGATIONS = ("first", "max", "noisy_or", "top3", "mean")
POLARITIES = ("SAT", "NEUTRAL", "DSAT")  # turn classes, in this order
MAX_POSITION = 9  # user turn positions 0..8 one-hot, 9 for the tenth and later


@dataclass(frozen=True)
class TurnRows:
    """Every user turn of some conversations as one feature row: ``owner`` is the row's conversation index."""

    X: sp.csr_matrix
    owner: np.ndarray
    polarity: np.ndarray  # index into POLARITIES, -1 where the turn has no rating

    def take(self, conversations: np.ndarray) -> TurnRows:
        """The rows of these conversations, re-owned by their position in ``conversations``."""
        position = np.full(max(int(self.owner.max(initial=-1)), int(np.max(conversations, initial=-1))) + 1, -1)
        position[conversations] = np.arange(len(conversations))
        rows = np.flatnonzero(np.isin(self.owner, conversations))
        return TurnRows(self.X[rows], position[self.owner[rows]], self.polarity[rows])


def turn_rows(conversations: Sequence[Conversation], polarities: Sequence[Sequence[int]] | None = None,
              featurizer: HashingFeaturizer | None = None) -> TurnRows:
    """Features of each user turn (its text, the assistant text since the previous user turn, its position).

    ``polarities[i]`` holds the turn classes of conversation i's user turns, in order (training only)."""
    featurizer = featurizer or HashingFeaturizer()
    pairs, owner, positions = [], [], []
    for i, conversation in enumerate(conversations):
        context: list[str] = []
        k = 0
        for turn in conversation.turns:
            if turn.role == "assistant":
                context.append(turn.text)
            elif turn.role == "user":
                turns = [Turn(index=0, role="assistant", text="\n".join(context))] if context else []
                turns.append(Turn(index=len(turns), role="user", text=turn.text))
                pairs.append(Conversation(conversation_id=f"{i}.{k}", turns=turns))
                owner.append(i)
                positions.append(min(k, MAX_POSITION))
                context, k = [], k + 1
    text = featurizer.transform(pairs) if pairs else sp.csr_matrix((0, featurizer.fit([]).n_features_out_), np.float32)
    onehot = sp.csr_matrix((np.ones(len(positions), np.float32), (np.arange(len(positions)), positions)),
                           shape=(len(positions), MAX_POSITION + 1))
    labels = np.full(len(owner), -1)
    if polarities is not None:
        start = 0
        counts = np.bincount(np.asarray(owner, dtype=int), minlength=len(conversations))
        for i, count in enumerate(counts):
            given = list(polarities[i])
            if len(given) != count:
                raise ConfigError(f"conversation {i}: {len(given)} turn labels for {count} user turns")
            labels[start:start + count] = given
            start += count
    return TurnRows(sp.hstack([text, onehot], format="csr"), np.asarray(owner, dtype=int), labels)


def aggregate(turn_proba: np.ndarray, owner: np.ndarray, n: int, how: str) -> np.ndarray:
    """Conversation scores from (n_turns, 3) turn probabilities; a conversation without user turns scores 0."""
    out = np.zeros(n)
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(n + 1))
    for i in range(n):
        p = turn_proba[order[bounds[i]:bounds[i + 1]]]
        if not len(p):
            continue
        dsat = p[:, 2]
        if how == "first":
            still_neutral = np.concatenate([[1.0], np.cumprod(p[:-1, 1])])
            out[i] = float(np.sum(dsat * still_neutral))
        elif how == "max":
            out[i] = float(dsat.max())
        elif how == "noisy_or":
            out[i] = 1.0 - float(np.prod(1.0 - dsat))
        elif how == "top3":
            out[i] = float(np.sort(dsat)[-3:].mean())
        elif how == "mean":
            out[i] = float(dsat.mean())
        else:
            raise ConfigError(f"unknown aggregation {how!r}; choose from {AGGREGATIONS}")
    return out


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    out: np.ndarray = np.log(p / (1 - p))
    return out


class TurnAggregateClassifier:
    """P(conversation DSAT) from turn-level polarity probabilities; see the module doc.

    Learned: ``C_``, ``aggregation_``, ``cv_auc_`` (grouped-CV ROC-AUC of the chosen pair), ``platt_``,
    ``turn_model_`` (the multinomial turn classifier refit on every training turn)."""

    def __init__(self, *, Cs: Sequence[float] = (0.1, 0.3), aggregations: Sequence[str] = AGGREGATIONS,
                 n_splits: int = 3, random_state: int = 0, class_weight: str | None = "balanced") -> None:
        unknown = set(aggregations) - set(AGGREGATIONS)
        if unknown or not aggregations:
            raise ConfigError(f"aggregations must be a non-empty subset of {AGGREGATIONS}. Got {aggregations!r}.")
        self.Cs, self.aggregations, self.n_splits, self.random_state = Cs, aggregations, n_splits, random_state
        self.class_weight = class_weight

    def _turn_fit(self, rows: TurnRows, C: float) -> LogisticRegression:
        rated = rows.polarity >= 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lbfgs may stop at max_iter on wide sparse rows: fine for ranking
            return LogisticRegression(C=C, class_weight=self.class_weight, max_iter=300).fit(
                rows.X[rated], rows.polarity[rated])

    @staticmethod
    def _proba(model: LogisticRegression, rows: TurnRows) -> np.ndarray:
        full = np.zeros((rows.X.shape[0], len(POLARITIES)))
        full[:, model.classes_] = model.predict_proba(rows.X)
        return full

    def fit(self, rows: TurnRows, y: np.ndarray) -> TurnAggregateClassifier:
        """``rows`` of n training conversations (owners 0..n-1, rated turns labelled); ``y``: 1 = DSAT."""
        y = np.asarray(y).astype(int)
        folds = StratifiedKFold(n_splits=self.n_splits, shuffle=True, random_state=self.random_state)
        scores = {(C, a): np.zeros(len(y)) for C in self.Cs for a in self.aggregations}
        for train, held in folds.split(np.zeros(len(y)), y):
            for C in self.Cs:
                model = self._turn_fit(rows.take(train), C)
                part = rows.take(held)
                proba = self._proba(model, part)
                for a in self.aggregations:
                    scores[(C, a)][held] = aggregate(proba, part.owner, len(held), a)
        auc = {key: float(roc_auc_score(y, s)) for key, s in scores.items()}
        self.C_, self.aggregation_ = max(auc, key=lambda key: auc[key])
        self.cv_auc_ = auc[(self.C_, self.aggregation_)]
        platt = LogisticRegression(C=1e6, max_iter=1000).fit(_logit(scores[(self.C_, self.aggregation_)])[:, None], y)
        self.platt_ = (float(platt.coef_[0, 0]), float(platt.intercept_[0]))
        self.turn_model_ = self._turn_fit(rows, self.C_)
        return self

    def predict_proba(self, rows: TurnRows, n: int) -> np.ndarray:
        """P(DSAT) of conversations 0..n-1 of ``rows`` (their ratings, if any, are not read)."""
        score = aggregate(self._proba(self.turn_model_, rows), rows.owner, n, self.aggregation_)
        return sigmoid(self.platt_[0] * _logit(score) + self.platt_[1])
