"""``bench use``: SPUR Table 1's user-satisfaction-estimation protocol on the USS files.

Protocol (Lin et al., 2024, Sec. 4 and Appendix B): conversation labels SAT / DSAT / NEUTRAL from
annotator means (:func:`distill.datasets.conversation_label`), conversations cut at the first
contradicting turn, 5 random splits, train on 5 % and test on 80 %, weighted precision / recall /
F1 in percent (mean over splits). The learning curve keeps a fixed 20 % test set per split and
trains on up to the other 80 %.

Models: each featurizer with convmon's distillation recipe (one class-balanced liblinear logistic
regression per class, C chosen by stratified CV on the training split, as
:class:`distill.model.ItemClassifier` does per rubric item),
and ``appendix-d``: the SPUR paper's distilled classifier as we read its Appendix D, an
off-the-shelf logistic regression on sentence embeddings (MiniLM stands in for ada-002, which
needs the network). A spec with ``+turns`` (``hashing+turns``) is also trained on the turn ratings of
the training conversations, its configuration chosen by CV grouped by conversation
(:mod:`bench.use_turns`). Features are stateless, so each conversation is featurized once per run.
Baselines on the same splits, so a reader sees what the models add: ``majority`` (always the
training split's most frequent label) and ``stratified`` (a label drawn at random with the
training split's label frequencies).

Beside Table 1, ``bench use`` measures the DSAT protocol of :mod:`bench.use_whole` (``dsat`` in
the result): the served recipe's ROC-AUC and rate error on cut *and* whole conversations; and the OVERALL
protocol of :mod:`bench.use_overall` (``overall``): whole-conversation dissatisfaction on the
dialogue-level OVERALL rating, candidate recipes chosen by nested cross-validation. The default run is
the quick one (baselines and ``hashing`` at 5 %, the DSAT protocol, 10 splits: minutes on 2 cores);
:func:`full_config` (``bench use --full``, ``make bench``) adds every featurizer, the learning curve and the
turn model on cut input (over an hour).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import precision_recall_fscore_support
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import Pipeline

from bench.use_agreement import panel_agreement
from bench.use_overall import OverallConfig, overall_rows
from bench.use_turns import TURNS, TurnModelFactory, turn_model
from bench.use_whole import DSAT_LABEL_RULE, DSAT_NOTES, DsatConfig, dsat_rows
from distill.datasets import load_uss
from distill.datasets.uss import UssDialogue
from distill.featurizers.embedding import MiniLMFeaturizer
from distill.featurizers.hashing import HashingFeaturizer
from distill.featurizers.spec import make_featurizer
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation

LABELS = ("SAT", "DSAT", "NEUTRAL")
CURVE_FRACTIONS = (0.05, 0.1, 0.2, 0.4, 0.8)
# Published numbers, not ours: SPUR Table 1, weighted F1 (%) with 5 % training data.
PAPER_SOURCE = "SPUR paper, Table 1 (Lin et al., ACL 2024, arXiv:2403.12388)"
PAPER_ROWS: tuple[dict[str, Any], ...] = tuple(
    {"dataset": dataset, "model": model, "train_fraction": 0.05, "weighted_f1": f1, "source": PAPER_SOURCE}
    for model, scores in (("Lin-ada", (29.1, 39.4)), ("ASAP", (52.5, 66.3)), ("SPUR", (59.0, 72.6)))
    for dataset, f1 in zip(("MWOZ", "SGD"), scores, strict=True)
)
BASELINES = {"majority": "most_frequent", "stratified": "stratified"}  # model name -> DummyClassifier strategy
FULL_MODELS = ("majority", "stratified", "hashing@char3-5", "hashing", "minilm@torch", "minilm",
               "hashing+minilm@torch", "hashing+minilm", "hashing+shape", "hashing+minilm+shape", "appendix-d")
QUICK_MODELS = ("majority", "stratified", "hashing")  # the default run: the served featurizer and the baselines
DEFAULT_MODELS = FULL_MODELS  # the name `make bench` and older callers know: the full list
DEFAULT_DATASETS = ("MWOZ", "SGD", "CCPE")
# The turn-supervised models `make bench` measures in a run of their own at 5 % only (``use-turns.json``): the
# default run's learning curve up to 80 % training would multiply their turn examples 16-fold.
TURN_MODELS = ("hashing+turns", "hashing+minilm+turns")
# Featurizer configurations that are no longer a default, kept to measure a change side by side:
# the hashing featurizer's char n-grams as they were (3-5 grams; now 4-grams), MiniLM in fp32 torch (now
# int8 ONNX by default).
LEGACY_PARTS: dict[str, Callable[[], BaseEstimator]] = {
    "hashing@char3-5": lambda: HashingFeaturizer(char_ngram_range=(3, 5)),
    "minilm@torch": lambda: MiniLMFeaturizer(backend="torch"),
}
_APPENDIX_D_FEATURES = "minilm"


@dataclass(frozen=True)
class UseConfig:
    data_dir: Path
    datasets: Sequence[str] = DEFAULT_DATASETS
    models: Sequence[str] = QUICK_MODELS
    splits: int = 10
    train_fraction: float = 0.05
    test_fraction: float = 0.8
    curve: Sequence[float] = ()
    curve_test_fraction: float = 0.2
    limit: int | None = None  # first N dialogues per file (smoke tests)
    seed: int = 0
    Cs: Sequence[float] = (0.1, 1.0, 10.0)
    n_jobs: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    dsat: DsatConfig | None = None  # the DSAT protocol's settings; None: Table 1 rows only
    overall: OverallConfig | None = None  # the OVERALL protocol's (its own splits and seeds); None: not run


def quick_config(data_dir: Path, **overrides: Any) -> UseConfig:
    """``bench use``'s default run: baselines and the served featurizer at 5 %, and the DSAT protocol."""
    return UseConfig(**{"data_dir": data_dir, "dsat": DsatConfig(), "overall": OverallConfig(), **overrides})


def full_config(data_dir: Path, **overrides: Any) -> UseConfig:
    """Everything (``bench use --full``): every featurizer, the learning curve, the turn model on cut input."""
    dsat = DsatConfig(turn_inputs=("cut", "whole"), turn_Cs=(0.1, 0.3))
    return UseConfig(**{"data_dir": data_dir, "models": FULL_MODELS, "curve": CURVE_FRACTIONS, "dsat": dsat,
                        "overall": OverallConfig(), **overrides})


def load_dialogues(data_dir: Path, name: str, limit: int | None = None) -> list[UssDialogue]:
    """One USS file's dialogues (the first ``limit``), uncut, with their turn ratings."""
    path = Path(data_dir) / "uss" / f"{name}.txt"
    if not path.is_file():
        path = Path(data_dir) / f"{name}.txt"
    if not path.is_file():
        raise ConfigError(f"USS file {name}.txt not found under {data_dir} (expected {data_dir}/uss/{name}.txt)")
    return load_uss(path)[:limit]


def load_dataset(data_dir: Path, name: str, limit: int | None = None) -> tuple[list[Conversation], np.ndarray]:
    """Conversations (cut per Appendix B) and their SPUR labels as indices into LABELS."""
    return _labelled(load_dialogues(data_dir, name, limit))


def _labelled(dialogues: list[UssDialogue]) -> tuple[list[Conversation], np.ndarray]:
    y = np.array([LABELS.index(d.label) for d in dialogues])
    return [d.to_conversation(cut=True) for d in dialogues], y


def _featurize(conversations: list[Conversation], spec: str, cache: dict[str, Any]) -> Any:
    """``a+b`` is the column concatenation of the parts, as FeatureUnion builds it; parts are cached.

    The empty spec (baselines) gives one constant column: they read no text."""
    if not spec:
        return np.zeros((len(conversations), 1), dtype=np.float32)
    parts = []
    for name in spec.split("+"):
        if name not in cache:
            featurizer = LEGACY_PARTS[name]() if name in LEGACY_PARTS else make_featurizer(name)
            cache[name] = featurizer.transform(conversations)
        parts.append(cache[name])
    if len(parts) == 1:
        return parts[0]
    if any(sp.issparse(p) for p in parts):
        return sp.hstack([sp.csr_matrix(p) for p in parts], format="csr")
    return np.hstack(parts)


def featurizer(spec: str) -> Callable[[list[Conversation]], Any]:
    """``spec``'s features of any conversations (a fresh cache per call: the rows differ from call to call)."""
    return lambda conversations: _featurize(conversations, spec, {})


def model_factory(model: str, Cs: Sequence[float], seed: int, n_jobs: int = 1
                  ) -> tuple[str, Callable[[], BaseEstimator]]:
    """(featurizer spec, estimator factory) for a model name of the benchmark."""
    if model in BASELINES:
        return "", lambda: DummyClassifier(strategy=BASELINES[model], random_state=seed)
    if model == "appendix-d":
        return _APPENDIX_D_FEATURES, lambda: Pipeline([("lr", LogisticRegression(max_iter=2000))])

    def recipe() -> BaseEstimator:
        lr = LogisticRegression(class_weight="balanced", solver="liblinear", max_iter=2000)
        base = Pipeline([("lr", OneVsRestClassifier(lr))])
        cv = StratifiedKFold(n_splits=3, shuffle=True, random_state=seed)
        return GridSearchCV(base, {"lr__estimator__C": list(Cs)}, scoring="f1_weighted", cv=cv, n_jobs=n_jobs)

    return model, recipe


def split_indices(n: int, *, train_fraction: float, test_fraction: float, seed: int) -> tuple[np.ndarray, ...]:
    """A random split: the test set first, the training set from what remains (never overlapping)."""
    if not (train_fraction > 0 and train_fraction + test_fraction <= 1 + 1e-9):
        raise ConfigError(f"train_fraction {train_fraction} + test_fraction {test_fraction} must be in (0, 1]")
    order = np.random.default_rng(seed).permutation(n)
    n_test = int(round(test_fraction * n))
    n_train = max(2, int(round(train_fraction * n)))
    return order[n_test : n_test + n_train], order[:n_test]


def evaluate_split(X: Any, y: np.ndarray, factory: Callable[[], BaseEstimator], train: np.ndarray,
                   test: np.ndarray) -> tuple[float, float, float]:
    """Weighted precision, recall, F1 (percent) on the test rows; one class in training predicts it."""
    classes = np.unique(y[train])
    if len(classes) == 1:
        predicted = np.full(len(test), classes[0])
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tiny classes (NEUTRAL) trip sklearn's fold-size warning
            predicted = factory().fit(X[train], y[train]).predict(X[test])
    p, r, f, _ = precision_recall_fscore_support(y[test], predicted, labels=list(range(len(LABELS))),
                                                 average="weighted", zero_division=0)
    return 100 * float(p), 100 * float(r), 100 * float(f)


def _protocol(X: Any, y: np.ndarray, factory: Callable[[], BaseEstimator], *, train_fraction: float,
              test_fraction: float, splits: int, seed: int) -> dict[str, Any]:
    scores = []
    for k in range(splits):
        train, test = split_indices(len(y), train_fraction=train_fraction, test_fraction=test_fraction,
                                    seed=seed + k)
        scores.append(evaluate_split(X, y, factory, train, test))
    mean, std = np.array(scores).mean(axis=0), np.array(scores).std(axis=0)
    return {"train_fraction": train_fraction, "test_fraction": test_fraction, "precision": round(float(mean[0]), 2),
            "recall": round(float(mean[1]), 2), "weighted_f1": round(float(mean[2]), 2),
            "weighted_f1_std": round(float(std[2]), 2), "splits": splits,
            "weighted_f1_per_split": [round(s[2], 2) for s in scores]}  # for paired comparisons of models


def _dsat(config: UseConfig, progress: Callable[[str], None] | None) -> list[dict[str, Any]]:
    """The DSAT protocol on every data set; in ``n_jobs`` processes (their progress lines are not relayed)."""
    assert config.dsat is not None
    dsat = replace(config.dsat, splits=config.splits, seed=config.seed)
    if config.n_jobs == 1 or len(config.datasets) == 1:
        return [row for d in config.datasets
                for row in dsat_rows(load_dialogues(config.data_dir, d, config.limit), d, dsat, progress)]
    if progress:
        progress(f"DSAT protocol on {', '.join(config.datasets)} in {min(config.n_jobs, len(config.datasets))} "
                 "processes")
    with ProcessPoolExecutor(max_workers=min(config.n_jobs, len(config.datasets))) as pool:
        futures = [pool.submit(dsat_rows, load_dialogues(config.data_dir, d, config.limit), d, dsat)
                   for d in config.datasets]
        return [row for future in futures for row in future.result()]


def _overall(config: UseConfig, progress: Callable[[str], None] | None) -> dict[str, Any] | None:
    """The OVERALL protocol, when ``config.datasets`` holds its training sets (CCPE out of domain if named)."""
    overall = config.overall
    if overall is None or not set(overall.train_sets) <= set(config.datasets):
        return None
    overall = replace(overall, out_of_domain=[d for d in overall.out_of_domain if d in config.datasets])
    names = [*overall.train_sets, *overall.out_of_domain]
    return overall_rows({n: load_dialogues(config.data_dir, n, config.limit) for n in names}, overall, progress)


def run_use(config: UseConfig, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Table 1 rows (``protocol: "table1"``), learning-curve rows (``protocol: "curve"``), with ``config.dsat``
    the DSAT protocol's rows (``dsat``; one process per data set when ``n_jobs`` > 1) and with ``config.overall``
    the OVERALL protocol's (``overall``: None when the data sets do not include its training sets)."""
    results: list[dict[str, Any]] = []
    overall = _overall(config, progress)
    dsat = _dsat(config, progress) if config.dsat is not None else []
    agreement: list[dict[str, Any]] = []
    for dataset in config.datasets:
        dialogues = load_dialogues(config.data_dir, dataset, config.limit)
        if config.dsat is not None:
            agreement.append(panel_agreement(dialogues, dataset, seed=config.seed))
        conversations, y = _labelled(dialogues)
        cache: dict[str, Any] = {}
        for model in config.models:
            factory: Callable[[], BaseEstimator]
            if model.endswith(TURNS):
                spec = model.removesuffix(TURNS)
                X, factory = turn_model(dialogues, _featurize(conversations, spec, cache), featurizer(spec),
                                        config.Cs, config.seed)
            else:
                spec, factory = model_factory(model, config.Cs, config.seed, config.n_jobs)
                X = _featurize(conversations, spec, cache)
            runs = [("table1", config.train_fraction, config.test_fraction)]
            runs += [("curve", f, config.curve_test_fraction) for f in config.curve]
            for protocol, train_fraction, test_fraction in runs:
                if progress:
                    progress(f"{dataset} {model} {protocol} train={train_fraction}")
                row = _protocol(X, y, factory, train_fraction=train_fraction, test_fraction=test_fraction,
                                splits=config.splits, seed=config.seed)
                if isinstance(factory, TurnModelFactory):
                    row["selected"] = factory.selections()
                results.append({"dataset": dataset, "model": model, "features": spec, "protocol": protocol,
                                "n": len(y), **row})
    return {"results": results, "paper": [dict(r) for r in PAPER_ROWS if r["dataset"] in config.datasets],
            "labels": list(LABELS), "label_rule": "SPUR Appendix B (annotator means, cut at first contradiction)",
            "models": MODEL_NOTES, "dsat": dsat, "dsat_label_rule": DSAT_LABEL_RULE, "dsat_models": DSAT_NOTES,
            "dsat_panel_agreement": agreement, "overall": overall}


MODEL_NOTES: dict[str, str] = {
    "majority": "baseline: always the training split's most frequent label",
    "stratified": "baseline: a random label with the training split's label frequencies",
    "hashing@char3-5": "the earlier hashing featurizer (char_wb 3-5-grams; now 4-grams), same recipe",
    "minilm@torch": "MiniLM run by sentence-transformers in fp32 torch (now int8 ONNX), same recipe",
    "shape": "conversation length (log turns, log user turns) as two extra columns",
    "appendix-d": f"plain LogisticRegression on {_APPENDIX_D_FEATURES} features (our reading of SPUR Appendix D; "
                  "MiniLM stands in for ada-002)",
    "turns": "turn-supervised: every rated user turn of the training conversations is an example (labelled by "
             "the conversation label's polarity rule), beside or instead of the conversation labels; labels only, "
             "context (prefix or turn), class weighting, C and aggregation (whole conversation or mean over turns) "
             "chosen by 5-fold CV grouped by conversation on the training split",
    "other": "featurizer + one-vs-rest class-balanced liblinear LogisticRegression, C by 3-fold stratified CV "
             "(convmon's distill recipe)",
}
