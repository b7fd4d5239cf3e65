"""``bench use``'s OVERALL protocol: whole-conversation dissatisfaction on the USS dialogue-level rating.

Every USS dialogue ends with ``USER<TAB>OVERALL<TAB><TAB>r1,r2,...``: each annotator's 1-5 rating of the
whole conversation. Labels, on whole conversations (what a worker receives): ``overall<3`` (item
``dsat.overall``: the panel's mean OVERALL is below neutral), ``overall<=2.5`` (a stricter cut), and
``spur`` (the SPUR Appendix B dialogue label of :mod:`bench.use_whole`, reported without a
bar: it is set by the first non-neutral user turn, not by the conversation as a whole).

Protocol: one model trained on MWOZ and SGD together (``train_sets``), ``splits`` held-out splits fixed by
their seeds (``seed + k``), each holding out ``test_fraction`` of every training data set; ROC-AUC and rate
error (|mean predicted probability - true share|, points) per data set, on the two pooled, and on CCPE
(``out_of_domain``: never trained on, never used to choose). Candidate recipes are featurizer specs, each
trained exactly as ``convmon distill train`` trains an item (:func:`distill.train.train_items`);
``selected`` is, per split, the candidate with the highest cross-validated ROC-AUC *on that split's training
rows* (nested cross-validation: the held-out rows never choose). The recipe to serve is the one that inner
CV picks on all of MWOZ and SGD (``chosen_on_all_training``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.metrics import roc_auc_score

from bench.use_agreement import overall_agreement, panel_agreement
from bench.use_whole import scoring_cpu_ms
from distill.datasets.uss import UssDialogue
from distill.featurizers.spec import featurizer_from_config, make_featurizer
from distill.train import TrainingSet, train_items
from monitor.contracts.errors import ModelError
from monitor.contracts.rubric_set import RubricItem, RubricSet


def mean_overall(dialogue: UssDialogue) -> float:
    """The panel's mean OVERALL rating (NaN where the dialogue has none)."""
    return float(np.mean(dialogue.overall)) if dialogue.overall else float("nan")


LABELS: dict[str, Callable[[UssDialogue], bool]] = {
    "overall<3": lambda d: mean_overall(d) < 3,
    "overall<=2.5": lambda d: mean_overall(d) <= 2.5,
    "spur": lambda d: d.label == "DSAT",
}
LABEL_RULES = {
    "overall<3": "dsat.overall: the annotators' mean OVERALL (dialogue-level) rating is below 3",
    "overall<=2.5": "the annotators' mean OVERALL rating is at most 2.5",
    "spur": "the SPUR Appendix B dialogue label is DSAT (first non-neutral user turn; reported without a bar)",
}
THRESHOLDS = {"overall<3": (3.0, False), "overall<=2.5": (2.5, True)}  # (cut, inclusive) for panel agreement
RECIPES = ("hashing", "lexicon", "hashing+lexicon@1", "hashing+lexicon", "hashing+lexicon@10")  # default weight: 3
OVERALL_RUBRIC = RubricSet(id="uss-overall", version="1", name="USS overall rating", items=[RubricItem(
    id="dsat.overall", name="Dissatisfied overall", polarity="dsat",
    description="The user is dissatisfied with the conversation as a whole.")])
BARS = {"MWOZ": 0.65, "SGD": 0.65, "pooled": 0.68}  # on the `selected` row of overall<3
RATE_ERROR_BAR = 2.0  # points, each data set


@dataclass(frozen=True)
class OverallConfig:
    splits: int = 5
    test_fraction: float = 0.25
    seed: int = 0
    labels: Sequence[str] = tuple(LABELS)
    recipes: Sequence[str] = RECIPES
    train_sets: Sequence[str] = ("MWOZ", "SGD")
    out_of_domain: Sequence[str] = ("CCPE",)


def recipe_featurizer(recipe: str) -> BaseEstimator:
    """A featurizer spec, or ``spec@w``: the same with the ``lexicon`` part weighted ``w``."""
    spec, _, weight = recipe.partition("@")
    featurizer = make_featurizer(spec)
    if weight:
        config = {"parts": [{"name": name, "params": {"weight": float(weight)} if name == "lexicon" else {}}
                            for name in spec.split("+")]}
        featurizer = featurizer_from_config(config)
    return featurizer


def _held_out(sets: Mapping[str, np.ndarray], config: OverallConfig, k: int) -> dict[str, np.ndarray]:
    """Per training data set, the rows held out by split ``k`` (its own permutation, seed ``seed + k``)."""
    out = {}
    for name in config.train_sets:
        rows = sets[name]
        order = np.random.default_rng(config.seed + k).permutation(len(rows))
        out[name] = rows[np.sort(order[: int(round(config.test_fraction * len(rows)))])]
    return out


def _fit(conversations: list[Any], X: Any, y: np.ndarray, rows: np.ndarray, featurizer: BaseEstimator,
         seed: int) -> tuple[Any, float]:
    data = TrainingSet([conversations[i] for i in rows], y[rows, None].astype(float), OVERALL_RUBRIC.item_ids,
                       np.array([conversations[i].conversation_id for i in rows], dtype=object))
    trained = train_items(data, featurizer, rubric=OVERALL_RUBRIC, features=X[rows], random_state=seed)
    return trained.model, float(trained.model.info["cv_auc"]["dsat.overall"])


def _scorer(model: Any, featurizer: BaseEstimator) -> Callable[[list[Any]], np.ndarray]:
    """What a worker runs on a batch: featurize, then the artifact's one matrix product."""
    return lambda batch: np.asarray(model.predict_proba(featurizer.transform(batch)))


def _score(y: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    return float(roc_auc_score(y, p)), abs(float(p.mean()) - float(y.mean()))


def _summary(aucs: list[float], errors: list[float]) -> dict[str, Any]:
    auc = np.array(aucs)
    return {"roc_auc": round(float(auc.mean()), 4), "roc_auc_std": round(float(auc.std()), 4),
            "roc_auc_per_split": [round(float(a), 4) for a in auc],
            "rate_error": round(100 * float(np.mean(errors)), 2),
            "rate_error_max": round(100 * float(np.max(errors)), 2)}


@dataclass
class _Pool:
    """Every dialogue of every data set, featurized once per recipe; ``sets`` holds each data set's rows."""

    dialogues: list[UssDialogue]
    conversations: list[Any]
    sets: dict[str, np.ndarray]
    features: dict[str, Any]
    training: np.ndarray


def _pool(dialogues: Mapping[str, Sequence[UssDialogue]], config: OverallConfig) -> tuple[_Pool, dict[str, float]]:
    names = [*config.train_sets, *config.out_of_domain]
    every = [d for name in names for d in dialogues[name]]
    conversations = [d.to_conversation() for d in every]
    sets, start = {}, 0
    for name in names:
        sets[name] = np.arange(start, start + len(dialogues[name]))
        start += len(dialogues[name])
    features, featurize_ms = {}, {}
    for recipe in config.recipes:
        started = time.process_time()
        features[recipe] = recipe_featurizer(recipe).transform(conversations)
        featurize_ms[recipe] = round(1000 * (time.process_time() - started) / len(conversations), 3)
    training = np.concatenate([sets[n] for n in config.train_sets])
    return _Pool(every, conversations, sets, features, training), featurize_ms


def _label_rows(pool: _Pool, label: str, config: OverallConfig, cpu_ms: dict[str, float] | None,
                progress: Callable[[str], None] | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One label's rows over the held-out splits, and the recipe inner CV picks on all training rows.
    ``cpu_ms``, when given, receives each recipe's scoring CPU on the first split's held-out conversations."""
    y = np.array([LABELS[label](d) for d in pool.dialogues], dtype=int)
    got: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    cv: dict[str, list[float]] = {r: [] for r in (*config.recipes, "selected")}
    picks: list[str] = []
    for k in range(config.splits):
        held = _held_out(pool.sets, config, k)
        train = np.setdiff1d(pool.training, np.concatenate(list(held.values())))
        tests = {**held, "pooled": np.concatenate(list(held.values())),
                 **{n: pool.sets[n] for n in config.out_of_domain}}
        predictions: dict[str, tuple[np.ndarray, float]] = {}
        for recipe in config.recipes:
            if progress:
                progress(f"overall {label} split {k + 1}/{config.splits} {recipe}")
            model, cv_auc = _fit(pool.conversations, pool.features[recipe], y, train, recipe_featurizer(recipe),
                                 config.seed + k)
            predictions[recipe] = (model.predict_proba(pool.features[recipe])[:, 0], cv_auc)
            if k == 0 and cpu_ms is not None:
                cpu_ms[recipe] = round(scoring_cpu_ms(_scorer(model, recipe_featurizer(recipe)),
                                                      [pool.conversations[i] for i in tests["pooled"]]), 3)
        pick = max(config.recipes, key=lambda r: predictions[r][1])
        picks.append(pick)
        predictions["selected"] = predictions[pick]
        for recipe, (p, cv_auc) in predictions.items():
            cv[recipe].append(cv_auc)
            for name, test in tests.items():
                auc, error = _score(y[test], p[test])
                aucs, errors = got.setdefault(recipe, {}).setdefault(name, ([], []))
                aucs.append(auc)
                errors.append(error)
    rows = []
    for recipe, per_set in got.items():
        for name, (aucs, errors) in per_set.items():
            row = {"label": label, "model": recipe, "dataset": name, "splits": config.splits,
                   "test_fraction": config.test_fraction, "cv_auc": round(float(np.mean(cv[recipe])), 4),
                   "out_of_domain": name in config.out_of_domain, **_summary(aucs, errors)}
            if recipe == "selected":
                row["chosen"] = {r: picks.count(r) for r in sorted(set(picks))}
            rows.append(row)
    if progress:
        progress(f"overall {label}: choosing on all of {', '.join(config.train_sets)}")
    all_cv = {r: _fit(pool.conversations, pool.features[r], y, pool.training, recipe_featurizer(r), config.seed)[1]
              for r in config.recipes}
    return rows, {"recipe": max(all_cv, key=lambda r: all_cv[r]), "cv_auc": {r: round(v, 4) for r, v in all_cv.items()}}


def overall_rows(dialogues: Mapping[str, Sequence[UssDialogue]], config: OverallConfig,
                 progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Rows per (label, recipe or ``selected``, data set), the recipe inner CV picks on all training data,
    each recipe's scoring CPU, and the panel agreement of each label. A label with too few dialogues of a
    class to train (``--limit`` runs) is listed in ``skipped`` with the reason."""
    names = [*config.train_sets, *config.out_of_domain]
    pool, featurize_ms = _pool(dialogues, config)
    rows: list[dict[str, Any]] = []
    chosen_all: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    cpu_ms: dict[str, float] = {}
    for label in config.labels:
        try:
            got, chosen_all[label] = _label_rows(pool, label, config, None if cpu_ms else cpu_ms, progress)
        except ModelError as exc:
            skipped[label] = str(exc)
            continue
        rows += got
    agreement = [{"label": label, **(overall_agreement(dialogues[n], n, *THRESHOLDS[label], seed=config.seed)
                                     if label in THRESHOLDS else panel_agreement(dialogues[n], n, seed=config.seed))}
                 for label in config.labels for n in names]
    shares = {label: {n: round(float(np.mean([LABELS[label](d) for d in dialogues[n]])), 4) for n in names}
              for label in config.labels}
    return {"rows": rows, "chosen_on_all_training": chosen_all, "skipped": skipped, "panel_agreement": agreement,
            "shares": shares, "labels": {label: LABEL_RULES[label] for label in config.labels},
            "recipes": list(config.recipes), "score_cpu_ms_per_conversation": cpu_ms,
            "featurize_cpu_ms_per_conversation": featurize_ms, "train_sets": list(config.train_sets),
            "out_of_domain": list(config.out_of_domain), "seeds": [config.seed + k for k in range(config.splits)],
            "bars": {**BARS, "rate_error": RATE_ERROR_BAR}}
