"""Transfer evaluation: train on one dialogue set with fixed hyper-parameters, test on another, per seed.

This is the protocol of the LLM-Rubric paper's "real" columns and of its released code: the network
is trained on the synthetic conversations with the hyper-parameters chosen by cross-validation there
(``best_synth_cross-validation_hp.json``) and predicts, for every real conversation, its annotator's
overall satisfaction; annotators are tied to the trained per-judge offsets through ``judge_map.json``.
One trained network is one draw: with 223 test rows and randomly initialised offsets the Pearson
correlation moves by ±0.1 between seeds, so the result is reported per seed, as a spread, and for the
seed ensemble (the per-seed answer distributions averaged), beside the baselines fitted once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from distill.calibration.baselines import default_baselines
from distill.calibration.crossval import predict_outputs, score
from distill.calibration.data import CalibrationDataError, CalibrationSet
from distill.calibration.network import LLMRubricCalibrator

__all__ = ["TransferResult", "parse_seeds", "read_judge_map", "read_reference_hyperparameters", "render_transfer",
           "transfer"]

#: LLM-Rubric's hyper-parameter file keys -> LLMRubricCalibrator parameters.
REFERENCE_KEYS = {"layer1_size": "hidden1", "layer2_size": "hidden2", "learning_rate": "learning_rate",
                  "batch_size": "batch_size", "pretraining_epochs": "pretrain_epochs",
                  "finetuning_epochs": "finetune_epochs", "all_data_size": "epoch_size"}
#: Keys that describe the data, not the training; checked against it (``num_judges`` is informational:
#: the released file says 13, the judges of one CV fold, while its judge map has 24).
STRUCTURE_KEYS = ("input_size", "output_size", "num_answers", "finetune_output", "num_judges", "random_seed")
METRICS = ("rmse", "pearson", "spearman", "kendall", "log_likelihood")


def _read_json(path: Path) -> Any:
    """A JSON file's value; a missing file or bad JSON is a CalibrationDataError naming the file (and line)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CalibrationDataError("file not found", path=path) from None
    except json.JSONDecodeError as exc:
        raise CalibrationDataError(f"not JSON: {exc.msg}", path=path, line=exc.lineno) from None


def read_judge_map(path: Path | str) -> dict[str, int]:
    """``{"annotator id": judge index}`` from a JSON object; indices must be 0..n-1, each once."""
    path = Path(path)
    raw = _read_json(path)
    if not isinstance(raw, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw.values()):
        raise CalibrationDataError("expected a JSON object of judge id -> integer index", path=path)
    if sorted(raw.values()) != list(range(len(raw))):
        raise CalibrationDataError(f"indices must be 0..{len(raw) - 1}, each once; got {sorted(raw.values())}",
                                   path=path)
    return {str(k): int(v) for k, v in raw.items()}


def read_reference_hyperparameters(path: Path | str, data: CalibrationSet) -> dict[str, Any]:
    """Calibrator parameters from LLM-Rubric's hyper-parameter JSON, checked against ``data``'s shape."""
    path = Path(path)
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise CalibrationDataError("expected a JSON object of hyper-parameters", path=path)
    unknown = sorted(set(raw) - set(REFERENCE_KEYS) - set(STRUCTURE_KEYS))
    if unknown:
        raise CalibrationDataError(f"unknown key(s) {', '.join(unknown)}; known: "
                                   f"{', '.join([*REFERENCE_KEYS, *STRUCTURE_KEYS])}", path=path)
    n_q, k = data.X_dialogues.shape[1:]
    expected = {"input_size": n_q * k, "output_size": n_q, "num_answers": k,
                "finetune_output": data.target_index - n_q}
    for key, want in expected.items():
        if key in raw and raw[key] != want:
            raise CalibrationDataError(f"{raw[key]!r} does not fit the data ({n_q} questions of up to {k} "
                                       f"options, target {data.target}): expected {want}", path=path, field=key)
    params: dict[str, Any] = {}
    for key, name in REFERENCE_KEYS.items():
        if key in raw:
            value = raw[key]
            ok = isinstance(value, float | int) and not isinstance(value, bool) and value > 0
            if not ok or (name != "learning_rate" and value != int(value)):
                raise CalibrationDataError(f"expected a positive {'number' if name == 'learning_rate' else 'integer'}"
                                           f", got {value!r}", path=path, field=key)
            params[name] = float(value) if name == "learning_rate" else int(value)
    return params


def parse_seeds(text: str) -> list[int]:
    """``"43-52"`` or ``"43,44,50"`` (or a mix) -> a list of distinct seeds, in order.

    >>> parse_seeds("43-45,50")
    [43, 44, 45, 50]
    """
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        lo, sep, hi = part.partition("-")
        try:
            span = range(int(lo), int(hi) + 1) if sep else [int(part)]
        except ValueError:
            raise ValueError(f"--seeds: {part!r} is not a seed or a range like 43-52") from None
        if not span:
            raise ValueError(f"--seeds: empty range {part!r}")
        seeds += [s for s in span if s not in seeds]
    return seeds


def _spread(rows: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    out = {}
    for m in METRICS:
        v = np.asarray([r[m] for r in rows], dtype=np.float64)
        out[m] = {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                  "min": float(v.min()), "max": float(v.max())}
    return out


@dataclass
class TransferResult:
    """Per-seed scores of LLM-Rubric, their spread, the seed ensemble and the baselines."""

    target: str
    hyperparameters: dict[str, Any]
    per_seed: list[dict[str, float]]
    ensemble: dict[str, float]
    baselines: dict[str, dict[str, float]]
    n: int
    n_classes: int
    unseen_judge_rows: int

    def summary(self) -> dict[str, Any]:
        return {"target": self.target, "n": self.n,
                "protocol": "transfer: train on the train set with fixed hyper-parameters, test on the test set, "
                            "one network per seed",
                "hyperparameters": self.hyperparameters, "seeds": [int(r["seed"]) for r in self.per_seed],
                "per_seed": self.per_seed, "spread": _spread(self.per_seed), "seed_ensemble": self.ensemble,
                "baselines": self.baselines, "uniform_log_likelihood": -math.log(self.n_classes),
                "test_rows_unseen_judge": self.unseen_judge_rows}


def transfer(train: CalibrationSet, test: CalibrationSet, *, params: Mapping[str, Any], seeds: Sequence[int]
             ) -> TransferResult:
    """Fit LLM-Rubric on all of ``train`` once per seed and score it on all of ``test``.

    Test rows are matched to per-judge offsets by judge id (through ``params["judge_index"]`` when
    given); a test judge the training set never saw gets the shared weights and is counted.
    """
    if test.questions != train.questions or test.target != train.target:
        raise ValueError(f"train and test sets ask different questions: {train.questions} vs {test.questions}")
    if not seeds:
        raise ValueError("give at least one seed")
    base = {"target_index": train.target_index, "n_options": train.n_options.tolist(), **params}
    y = test.labels[:, test.target_index]
    per_seed, probas = [], []
    for seed in seeds:
        model = LLMRubricCalibrator(**{**base, "random_state": int(seed)})
        model.fit(train.X, train.labels, judges=train.judges)
        out = predict_outputs(model, test.X, test.judges)
        per_seed.append({"seed": int(seed), **score(y, out.expected, out.proba, model.classes_)})
        if out.proba is None:
            raise ValueError("the calibrator gave no answer distribution")
        probas.append(out.proba)
    classes = model.classes_
    mean_proba = np.mean(probas, axis=0)
    ensemble = score(y, mean_proba @ classes.astype(np.float64), mean_proba, classes)
    baselines = {}
    for name, est in default_baselines(target_index=train.target_index, n_options=train.n_options,
                                       calibrator_params={**base, "random_state": int(seeds[0])},
                                       random_state=int(seeds[0])).items():
        est.fit(train.X, train.labels, judges=train.judges)
        out = predict_outputs(est, test.X, test.judges)
        baselines[name] = score(y, out.expected, out.proba, classes, satisfied=out.satisfied)
    unseen = int(sum(str(j) not in set(model.judges_.tolist()) for j in test.judges))
    hp = {k: v for k, v in base.items() if k not in ("n_options", "target_index", "judge_index", "random_state")}
    return TransferResult(train.target, hp | {"judge_map": base.get("judge_index") is not None}, per_seed,
                          ensemble, baselines, len(test), len(classes), unseen)


def _cells(row: Mapping[str, Any]) -> str:
    def fmt(v: Any) -> str:
        return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.3f}"
    return " | ".join(fmt(row.get(m)) for m in METRICS)


def render_transfer(summary: Mapping[str, Any]) -> str:
    """Markdown: one row per seed, the spread, the seed ensemble, then the baselines."""
    head = f"| | {' | '.join(METRICS)} |\n|---|{'---|' * len(METRICS)}"
    lines = [f"# Transfer evaluation of {summary['target']} ({summary['n']} test rows)", "",
             f"Protocol: {summary['protocol']}. Uniform log-likelihood "
             f"{summary['uniform_log_likelihood']:.3f}; test rows of a judge unseen in training (shared "
             f"weights): {summary['test_rows_unseen_judge']}.", "", head]
    lines += [f"| seed {r['seed']} | {_cells(r)} |" for r in summary["per_seed"]]
    spread = summary["spread"]
    for stat in ("mean", "sd", "min", "max"):
        lines.append(f"| {stat} over seeds | {_cells({m: spread[m][stat] for m in METRICS})} |")
    lines += [f"| seed ensemble | {_cells(summary['seed_ensemble'])} |", "", "Baselines:", "", head]
    lines += [f"| {name} | {_cells(row)} |" for name, row in summary["baselines"].items()]
    return "\n".join(lines)
