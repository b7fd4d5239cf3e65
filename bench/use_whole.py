"""``bench use``'s DSAT protocol: what the worker serves, on what the worker sees, over 10 grouped splits.

SPUR's Table 1 protocol (:mod:`bench.use`) cuts each conversation at its first user turn whose
rating contradicts the dialogue label, a position computed from the human labels, test conversations
included; a worker never receives a cut conversation. This protocol measures the binary question the monitor
exports a rate for, "is this conversation DSAT" (the dialogue label of shared/data/README, SPUR Appendix B),
twice: on the cut conversations (``input: cut``, the paper's input) and on the whole conversations
(``input: whole``, what a worker receives; same labels).

Models:

* ``served``: exactly what ``convmon distill train`` builds (:func:`distill.train.train_items`: the
  ``hashing`` featurizer, one class-balanced liblinear LR per item with C by grouped 3-fold CV ROC-AUC, Platt
  scaling on cross-fitted decisions), one item ``dsat.conversation`` trained on the dialogue labels;
* ``turn-aggregate``: :class:`distill.turn_level.TurnAggregateClassifier`, supervised by the turn ratings of the
  training conversations (never of the test ones), C and aggregation chosen by CV on the training split;
* ``selected``: per split, whichever of the two has the higher cross-validated ROC-AUC *on the training
  split* (its test AUC is reported, never the best of rows on the test split).

Each split holds out ``test_fraction`` of the dialogues (one row per dialogue, so grouped by dialogue). Per
row: ROC-AUC mean / std over splits and per split, and the rate error: |mean predicted P(DSAT) - DSAT share|
of the test dialogues, in points, mean over splits; the in-process CPU milliseconds per conversation to
featurize and score the first split's held-out conversations (best of 3 passes), for ``served`` and
``turn-aggregate``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupShuffleSplit

from distill.datasets.uss import UssDialogue, _turn_polarity, conversation_label
from distill.featurizers.hashing import HashingFeaturizer
from distill.train import TrainingSet, train_items
from distill.turn_level import POLARITIES, TurnAggregateClassifier, TurnRows, turn_rows
from monitor.contracts.rubric_set import RubricItem, RubricSet

INPUTS = ("cut", "whole")
TURN_MODEL = "turn-aggregate"
DSAT_MODELS = ("served", TURN_MODEL, "selected")
SERVED_FEATURIZER = "hashing"  # Settings.featurizer's default: what `distill train` builds unless told otherwise
DSAT_RUBRIC = RubricSet(id="uss-dsat", version="1", name="USS dialogue label", items=[RubricItem(
    id="dsat.conversation", name="DSAT conversation", polarity="dsat",
    description="The conversation's SPUR Appendix B label (shared/data/README) is DSAT.")])
DSAT_LABEL_RULE = ("DSAT = the dialogue label of shared/data/README (SPUR Appendix B: the first non-neutral user turn "
              "by annotator mean is dissatisfied); SAT and NEUTRAL are negatives")


DSAT_NOTES = {
    "served": f"what `convmon distill train` builds: `{SERVED_FEATURIZER}` featurizer, distill.train.train_items "
              "(class-balanced liblinear LR, C in (0.1, 1, 10) by grouped 3-fold CV ROC-AUC, Platt scaling), one item "
              "trained on the dialogue labels",
    TURN_MODEL: "distill.turn_level.TurnAggregateClassifier: a multinomial LR on each user turn (hashing features "
                "of the turn and the assistant text it answers, its position) trained on the training dialogues' turn "
             "polarities, aggregated per conversation (P(first non-neutral turn is DSAT), max, noisy-OR, top-3 mean "
             "or mean) and Platt-calibrated; C and aggregation by 3-fold CV ROC-AUC on the training split",
    "selected": "per split, `served` or `turn-aggregate`, whichever has the higher CV ROC-AUC on the training split",
}


@dataclass(frozen=True)
class DsatConfig:
    splits: int = 10
    test_fraction: float = 0.25
    seed: int = 0
    inputs: Sequence[str] = INPUTS
    models: Sequence[str] = DSAT_MODELS
    turn_inputs: Sequence[str] = ("whole",)  # the turn model on cut input too only in --full runs
    turn_Cs: Sequence[float] = (0.1,)  # 0.1 and 0.3 tie on USS (--full tries both); each C costs 3 fits


def _turn_classes(dialogue: UssDialogue, cut: bool) -> tuple[list[int], int]:
    """Polarity classes of the user turns a conversation keeps (-1 unrated), and the cut position."""
    end = conversation_label(dialogue)[1] if cut else len(dialogue.turns)
    classes = [POLARITIES.index(_turn_polarity(t.ratings)) if t.ratings else -1
               for t in dialogue.turns[:end] if t.role == "user" and not t.empty]
    return classes, end


def _rows(dialogues: Sequence[UssDialogue], cut: bool) -> tuple[list[Any], TurnRows]:
    conversations = [d.to_conversation(cut=cut) for d in dialogues]
    return conversations, turn_rows(conversations, [_turn_classes(d, cut)[0] for d in dialogues])


def _served(conversations: list[Any], X: Any, y: np.ndarray, train: np.ndarray, test: np.ndarray,
            seed: int) -> tuple[np.ndarray, float, Callable[[list[Any]], np.ndarray]]:
    data = TrainingSet([conversations[i] for i in train], y[train, None].astype(float), DSAT_RUBRIC.item_ids,
                       np.asarray(train))
    trained = train_items(data, SERVED_FEATURIZER, rubric=DSAT_RUBRIC, features=X[train], random_state=seed)
    model, featurizer = trained.model, trained.featurizer
    return (model.predict_proba(X[test])[:, 0], float(model.info["cv_auc"]["dsat.conversation"]),
            lambda batch: model.predict_proba(featurizer.transform(batch))[:, 0])


def _turns(rows: TurnRows, y: np.ndarray, train: np.ndarray, test: np.ndarray, config: DsatConfig,
           seed: int) -> tuple[np.ndarray, float, Callable[[list[Any]], np.ndarray], dict[str, Any]]:
    model = TurnAggregateClassifier(Cs=config.turn_Cs, random_state=seed).fit(rows.take(train), y[train])
    held = rows.take(test)
    return (model.predict_proba(held, len(test)), model.cv_auc_,
            lambda batch: model.predict_proba(turn_rows(batch), len(batch)),
            {"C": model.C_, "aggregation": model.aggregation_})


def scoring_cpu_ms(score: Callable[[list[Any]], np.ndarray], conversations: list[Any], repeats: int = 3) -> float:
    """In-process CPU milliseconds per conversation to featurize and score a batch (best of ``repeats``)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        score(conversations)
        best = min(best, time.process_time() - started)
    return 1000 * best / max(len(conversations), 1)


def _summary(values: dict[str, list[Any]]) -> dict[str, Any]:
    auc = np.array(values["auc"])
    return {"roc_auc": round(float(auc.mean()), 4), "roc_auc_std": round(float(auc.std()), 4),
            "roc_auc_per_split": [round(float(a), 4) for a in auc],
            "rate_error": round(100 * float(np.mean(values["rate_error"])), 2),
            "rate_error_max": round(100 * float(np.max(values["rate_error"])), 2),
            "cv_auc": round(float(np.mean(values["cv_auc"])), 4), "seconds": round(float(sum(values["seconds"])), 1),
            "score_cpu_ms_per_conversation": round(float(values["score_ms"][0]), 3) if values["score_ms"] else None}


def dsat_rows(dialogues: Sequence[UssDialogue], dataset: str, config: DsatConfig,
              progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """One row per (input, model) for one USS file."""
    y = np.array([d.label == "DSAT" for d in dialogues], dtype=int)
    groups = np.array([d.dialogue_id for d in dialogues])
    splitter = GroupShuffleSplit(n_splits=config.splits, test_size=config.test_fraction, random_state=config.seed)
    splits = list(splitter.split(np.zeros(len(y)), y, groups))
    out = []
    for source in config.inputs:
        conversations, rows = _rows(dialogues, cut=source == "cut")
        X = HashingFeaturizer().transform(conversations)
        models = [m for m in config.models if m != TURN_MODEL or source in config.turn_inputs]
        if TURN_MODEL not in models:
            models = [m for m in models if m != "selected"]
        got: dict[str, dict[str, list[Any]]] = {m: {"auc": [], "rate_error": [], "cv_auc": [], "seconds": [],
                                                    "score_ms": []} for m in models}
        chosen: list[dict[str, Any]] = []
        for k, (train, test) in enumerate(splits):
            if progress:
                progress(f"{dataset} dsat {source} split {k + 1}/{len(splits)}")
            predictions: dict[str, tuple[np.ndarray, float]] = {}
            held = [conversations[i] for i in test]
            started = time.process_time()
            if "served" in models:
                p, cv, score = _served(conversations, X, y, train, test, config.seed + k)
                predictions["served"] = (p, cv)
                got["served"]["seconds"].append(time.process_time() - started)
                if k == 0:
                    got["served"]["score_ms"].append(scoring_cpu_ms(score, held))
            if TURN_MODEL in models:
                started = time.process_time()
                p, cv, score, detail = _turns(rows, y, train, test, config, config.seed + k)
                predictions[TURN_MODEL] = (p, cv)
                got[TURN_MODEL]["seconds"].append(time.process_time() - started)
                if k == 0:
                    got[TURN_MODEL]["score_ms"].append(scoring_cpu_ms(score, held))
                if "selected" in models:
                    candidates = [m for m in ("served", TURN_MODEL) if m in predictions]
                    pick = max(candidates, key=lambda m: predictions[m][1])
                    predictions["selected"] = predictions[pick]
                    got["selected"]["seconds"].append(0.0)
                    chosen.append({"model": pick, **detail})
                else:
                    chosen.append(detail)
            for m, (p, cv) in predictions.items():
                got[m]["auc"].append(roc_auc_score(y[test], p))
                got[m]["rate_error"].append(abs(float(p.mean()) - float(y[test].mean())))
                got[m]["cv_auc"].append(cv)
        for m in models:
            row = {"dataset": dataset, "protocol": "dsat", "input": source, "model": m, "n": len(y),
                   "positives": int(y.sum()), "splits": len(splits), "test_fraction": config.test_fraction,
                   **_summary(got[m])}
            if m in (TURN_MODEL, "selected") and chosen:
                row["chosen"] = chosen
            out.append(row)
    return out
