"""How well one panel of USS annotators reproduces the dialogue label another panel gives the same dialogue.

The DSAT protocol's label (shared/data/README, SPUR Appendix B) is the polarity of the first user turn whose
annotator mean is not neutral. Each USS dialogue has 3-7 annotators who rated every user turn, so the label can
be computed twice from disjoint halves of them: what one half says, graded (how far its mean at its first
non-neutral turn lies below neutral), ranks the other half's label with this ROC-AUC. It is how far humans who
read every turn agree on the label, and so a reference for any model's whole-conversation AUC; a half panel is
smaller than the full one, so the full label is somewhat more reliable than these figures.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from typing import Any

from sklearn.metrics import roc_auc_score

from distill.datasets.uss import UssDialogue, _turn_polarity


def _graded(dialogue: UssDialogue, panel: Sequence[int]) -> tuple[int, float]:
    """The panel's label (1: DSAT) and its graded form: 3 minus its mean at its first non-neutral turn."""
    for turn in dialogue.turns:
        if turn.role == "user" and turn.ratings:
            ratings = tuple(turn.ratings[i] for i in panel)
            polarity = _turn_polarity(ratings)  # the protocol's own turn rule (annotator mean against 3)
            if polarity != "NEUTRAL":
                return int(polarity == "DSAT"), 3 - sum(ratings) / len(ratings)
    return 0, 0.0


def panel_agreement(dialogues: Sequence[UssDialogue], dataset: str, *, splits: int = 20,
                    seed: int = 0) -> dict[str, Any]:
    """ROC-AUC of one random half of each dialogue's annotators (graded) against the other half's label, mean
    and range over ``splits`` random halvings (the smaller half predicts; 1 of 3 annotators against 2); None
    where no halving holds both labels."""
    rated = [d for d in dialogues if any(t.ratings for t in d.turns)]
    aucs = []
    for split in range(splits):
        rng = random.Random(seed + split)
        labels, scores = [], []
        for dialogue in rated:
            k = len(next(t.ratings for t in dialogue.turns if t.ratings))
            if k < 2:
                continue
            order = rng.sample(range(k), k)
            labels.append(_graded(dialogue, order[k // 2:])[0])
            scores.append(_graded(dialogue, order[: k // 2])[1])
        if len(set(labels)) == 2:  # a handful of dialogues (``--limit``) may hold one label only
            aucs.append(float(roc_auc_score(labels, scores)))
    if not aucs:
        return {"dataset": dataset, "dialogues": len(labels), "splits": 0, "roc_auc": None, "roc_auc_min": None,
                "roc_auc_max": None}
    return {"dataset": dataset, "dialogues": len(labels), "splits": len(aucs),
            "roc_auc": round(statistics.mean(aucs), 3), "roc_auc_min": round(min(aucs), 3),
            "roc_auc_max": round(max(aucs), 3)}


def overall_agreement(dialogues: Sequence[UssDialogue], dataset: str, cut: float, inclusive: bool, *,
                      splits: int = 20, seed: int = 0) -> dict[str, Any]:
    """As :func:`panel_agreement`, for "the mean OVERALL rating is below ``cut``" (at most, when ``inclusive``):
    one half's mean OVERALL, negated, ranks the other half's label."""
    rated = [d for d in dialogues if len(d.overall) >= 2]
    aucs = []
    for split in range(splits):
        rng = random.Random(seed + split)
        labels, scores = [], []
        for dialogue in rated:
            k = len(dialogue.overall)
            order = rng.sample(range(k), k)
            other = statistics.mean(dialogue.overall[i] for i in order[k // 2:])
            labels.append(int(other <= cut if inclusive else other < cut))
            scores.append(-statistics.mean(dialogue.overall[i] for i in order[: k // 2]))
        if len(set(labels)) == 2:
            aucs.append(float(roc_auc_score(labels, scores)))
    if not aucs:
        return {"dataset": dataset, "dialogues": len(rated), "splits": 0, "roc_auc": None, "roc_auc_min": None,
                "roc_auc_max": None}
    return {"dataset": dataset, "dialogues": len(rated), "splits": len(aucs),
            "roc_auc": round(statistics.mean(aucs), 3), "roc_auc_min": round(min(aucs), 3),
            "roc_auc_max": round(max(aucs), 3)}
