"""``convmon bench pii --scoring``: does redaction cost the served distilled classifier accuracy?

Target: distilled ROC-AUC on USS with redaction within 0.01 of raw. The worker scores text redacted at
the input boundary with a model trained on labels redacted the same way, so the comparison trains and tests the
served recipe twice on the same splits: once on raw text, once on redacted text (train and test both).

The recipe is exactly what ``convmon distill train`` builds and ``bench use``'s ``served`` row measures
(:func:`distill.train.train_items`: the ``hashing`` featurizer, one class-balanced liblinear LR with C by
grouped 3-fold CV ROC-AUC, Platt scaling), one item ``dsat.conversation`` on the USS dialogue label (DSAT
vs SAT and NEUTRAL), per USS file, on the conversations cut as in SPUR's Table 1 (where the recipe has signal:
ROC-AUC about 0.7) and on whole conversations (what a worker receives; the recipe is near chance there, so a
difference on ``whole`` alone would say little).
The judge slice's AUC needs a real LLM judge reading the text, which the bench does not have: not measured.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedShuffleSplit

from bench.use_whole import DSAT_LABEL_RULE, DSAT_RUBRIC, INPUTS, SERVED_FEATURIZER
from distill.datasets.uss import UssDialogue, load_uss
from distill.featurizers.hashing import HashingFeaturizer
from distill.train import TrainingSet, train_items
from monitor.judge.redact import Redactor

BAR = 0.01  # the bar: |AUC redacted - AUC raw| within this


def scoring_effect(data: Path, files: list[str], splits: int = 3, test_fraction: float = 0.25, seed: int = 0,
                   redactor: Redactor | None = None, inputs: tuple[str, ...] = INPUTS) -> dict[str, Any]:
    """Served-recipe ROC-AUC on raw and on redacted USS conversations, per file and input, the same splits."""
    redactor = redactor or Redactor()
    rows = [_row(name, source, load_uss(data / "uss" / f"{name}.txt"), redactor, splits, test_fraction, seed)
            for name in files for source in inputs]
    worst = max((abs(r["difference"]) for r in rows), default=0.0)
    return {"recipe": f"served: what `convmon distill train` builds ({SERVED_FEATURIZER} featurizer, train_items)",
            "label": DSAT_LABEL_RULE, "splits": splits, "test_fraction": test_fraction, "rows": rows,
            "max_abs_difference": worst, "bar": BAR, "within_bar": worst <= BAR,
            "judge_slice": "not measured: needs a real LLM judge reading the text (the simulated judge answers "
                           "from ground truth and never reads it)"}


def _row(name: str, source: str, dialogues: list[UssDialogue], redactor: Redactor, splits: int,
         test_fraction: float, seed: int) -> dict[str, Any]:
    raw = [d.to_conversation(cut=source == "cut") for d in dialogues]
    y = np.array([d.label == "DSAT" for d in dialogues], dtype=int)
    started = time.process_time()
    redacted = [redactor.redact_conversation(c) for c in raw]
    redact_s = time.process_time() - started
    turns_changed = sum(a.text != b.text for c, r in zip(raw, redacted, strict=True)
                        for a, b in zip(c.turns, r.turns, strict=True))
    versions = {"raw": raw, "redacted": redacted}
    features = {key: HashingFeaturizer().transform(conversations) for key, conversations in versions.items()}
    splitter = StratifiedShuffleSplit(n_splits=splits, test_size=test_fraction, random_state=seed)
    auc: dict[str, list[float]] = {key: [] for key in versions}
    train_s = 0.0
    for k, (train, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
        for key, conversations in versions.items():
            X = features[key]
            data_ = TrainingSet([conversations[i] for i in train], y[train, None].astype(float), DSAT_RUBRIC.item_ids,
                                np.asarray(train))
            started = time.process_time()
            model = train_items(data_, SERVED_FEATURIZER, rubric=DSAT_RUBRIC, features=X[train],
                                random_state=seed + k).model
            train_s += time.process_time() - started
            auc[key].append(float(roc_auc_score(y[test], model.predict_proba(X[test])[:, 0])))
    mean = {key: round(float(np.mean(v)), 4) for key, v in auc.items()}
    return {"dataset": name, "input": source, "conversations": len(y), "positives": int(y.sum()),
            "turns": sum(len(c.turns) for c in raw), "turns_changed_by_redaction": turns_changed,
            "roc_auc": mean, "roc_auc_per_split": {key: [round(a, 4) for a in v] for key, v in auc.items()},
            "difference": round(mean["redacted"] - mean["raw"], 4),
            "difference_per_split": [round(b - a, 4) for a, b in zip(auc["raw"], auc["redacted"], strict=True)],
            "redact_cpu_ms_per_conversation": round(1000 * redact_s / max(len(raw), 1), 3),
            "train_cpu_s": round(train_s, 1)}
