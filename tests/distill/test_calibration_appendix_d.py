"""SPUR Appendix D heads beside LLM-Rubric: same folds, same rows, in the report and the JSON."""

from __future__ import annotations

import csv
import doctest
import importlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from distill.calibration.appendix_d import AppendixDLinear, AppendixDLogistic
from distill.calibration.cli import app
from distill.calibration.crossval import dialogue_folds, evaluate, predict_outputs, score
from distill.calibration.data import CalibrationSet
from distill.calibration.summary import render_markdown
from distill.satisfaction import SatisfactionModel

torch.set_num_threads(1)
TINY = {"hidden1": 6, "hidden2": 6, "pretrain_epochs": 1, "finetune_epochs": 3, "batch_size": 32}


def make_set(*, n_dialogues: int = 40, per_dialogue: int = 3, noise: float = 0.4, seed: int = 0,
             prefix: str = "d") -> CalibrationSet:
    """Q0 follows the judge's Q1 answer (1 + 3 P(Q1 >= 3)) plus annotator noise; Q2 is noise."""
    rng = np.random.default_rng(seed)
    X = rng.dirichlet(np.full(4, 0.5), size=(n_dialogues, 3)).astype(np.float32)
    latent = 1 + 3 * X[:, 0, 2:].sum(axis=1)
    index = np.repeat(np.arange(n_dialogues), per_dialogue)
    q0 = np.clip(np.rint(latent[index] + rng.normal(0, noise, len(index))), 1, 4).astype(int)
    labels = np.column_stack([rng.integers(1, 5, len(index)), rng.integers(0, 5, len(index)), q0])
    judges = np.asarray([f"a{j}" for j in rng.integers(0, 5, len(index))], dtype=object)
    return CalibrationSet(X, tuple(f"{prefix}{i}" for i in range(n_dialogues)), index, labels, judges,
                          ("Q1", "Q2", "Q0"), np.array([4, 4, 4]), "Q0")


def test_linear_head_beats_the_constant_mean_when_q0_follows_the_rubric() -> None:
    ev = evaluate(make_set(), params=TINY)
    s = ev.scores
    assert {s[n]["n"] for n in s} == {120}  # every method scores the same rows
    assert s["appendix_d_linear"]["rmse"] < 0.8 * s["constant_mean"]["rmse"]
    assert s["appendix_d_linear"]["pearson"] > 0.6
    assert s["appendix_d_logistic"]["roc_auc"] > 0.8
    assert "rmse" not in s["appendix_d_logistic"] and "smooth_ece" not in s["appendix_d_linear"]
    assert "appendix_d_linear" in ev.dialogue_level and "appendix_d_logistic" not in ev.dialogue_level

    summary = json.loads(json.dumps(ev.summary()))
    assert set(summary["appendix_d"]) == {"features", "linear", "logistic"}
    assert not set(summary["baselines"]) & {"appendix_d_linear", "appendix_d_logistic"}
    assert summary["appendix_d"]["logistic"]["brier"] < s["random"]["brier"]
    md = render_markdown(ev)
    assert "| SPUR App. D, linear head (rubric scores) |" in md
    assert "| SPUR App. D, logistic head (rubric scores) |" in md
    assert "no embedding: the dialogue texts are not in the data" in md


def test_out_of_fold_predictions_ignore_the_labels_of_their_own_fold() -> None:
    data = make_set(seed=1)
    fold0 = dialogue_folds(data.groups) == 0
    labels = data.labels.copy()
    labels[fold0, 2] = 5 - labels[fold0, 2]  # flip fold 0's Q0 answers
    flipped = CalibrationSet(data.X_dialogues, data.dialogue_ids, data.dialogue_index, labels, data.judges,
                             data.questions, data.n_options, data.target)
    a, b = evaluate(data, params=TINY), evaluate(flipped, params=TINY)
    for name, field in (("appendix_d_linear", "expected"), ("appendix_d_logistic", "satisfied"),
                        ("llm_rubric", "proba")):
        before, after = getattr(a.predictions[name], field), getattr(b.predictions[name], field)
        np.testing.assert_allclose(before[fold0], after[fold0], err_msg=name)  # a leak would move these
        assert not np.allclose(before[~fold0], after[~fold0]), name  # fold 0 trains the other folds


def test_heads_share_one_model_across_judges_and_group_the_inner_cv_by_dialogue(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_set(n_dialogues=30)
    labels = data.labels.copy()
    labels[:5, 2] = 0  # unanswered targets are left out of the fit
    seen: list[tuple[int, int]] = []
    fit = SatisfactionModel.fit

    def spy(self: SatisfactionModel, X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> SatisfactionModel:
        seen.append((len(y), len(np.unique(groups))))
        return fit(self, X, y, groups)

    monkeypatch.setattr(SatisfactionModel, "fit", spy)
    linear = AppendixDLinear(target_index=2).fit(data.X, labels, judges=data.judges)
    logistic = AppendixDLogistic(target_index=2).fit(data.X, labels, judges=data.judges)
    assert seen == [(85, 29), (85, 29)]  # 90 rows - 5 unanswered; 30 dialogues - the one left with none
    out = predict_outputs(linear, data.X[:2], np.array(["a0", "zz"], dtype=object))
    assert out.proba is None and out.satisfied is None
    assert out.expected[0] == pytest.approx(linear.predict(data.X[:1], judges=np.array(["a3"]))[0])
    out = predict_outputs(logistic, data.X[:2], data.judges[:2])
    assert out.expected is None and out.proba is None and ((out.satisfied > 0) & (out.satisfied < 1)).all()
    with pytest.raises(ValueError, match=r"X must be \(n_samples, n_questions, max_options\) and y"):
        AppendixDLinear().fit(data.X[:, 0], labels)
    with pytest.raises(ValueError, match=r"X must be \(n_samples, n_questions, max_options\); got shape \(90, 4\)"):
        linear.predict(data.X[:, 0])


def test_score_reports_only_what_a_method_predicts() -> None:
    y = np.array([1, 2, 3, 4, 4, 3])
    sat = np.array([0.1, 0.3, 0.8, 0.9, 0.7, 0.6])
    s = score(y, None, None, np.arange(1, 5), satisfied=sat)
    assert set(s) == {"n", "smooth_ece", "brier", "roc_auc", "sat_log_likelihood", "mean_satisfied"}
    assert s["roc_auc"] == 1.0 and s["brier"] == pytest.approx(np.mean((sat - (y >= 3)) ** 2))
    assert s["mean_satisfied"] == pytest.approx(sat.mean())
    assert s["sat_log_likelihood"] == pytest.approx(np.mean(np.log([0.9, 0.7, 0.8, 0.9, 0.7, 0.6])))
    assert set(score(y, y + 0.5, None, np.arange(1, 5))) == {"rmse", "pearson", "spearman", "kendall", "n"}


def write_tsvs(data: CalibrationSet, directory: Path, name: str) -> tuple[Path, Path]:
    judgments, evaluations = directory / f"{name}_judgments.tsv", directory / f"{name}_evaluations.tsv"
    with judgments.open("w", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(["text_id", *data.questions, "annotator_id"])
        for d, row, judge in zip(data.dialogue_index, data.labels, data.judges, strict=True):
            writer.writerow([data.dialogue_ids[d], *row.tolist(), judge])
    with evaluations.open("w", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(["text_id", "criterion", "answer1_prob", "answer2_prob", "answer3_prob", "answer4_prob"])
        for d, dialogue in enumerate(data.dialogue_ids):
            for q, question in enumerate(data.questions):
                writer.writerow([dialogue, question, *(f"{p:.6f}" for p in data.X_dialogues[d, q])])
    return judgments, evaluations


def test_cli_json_has_appendix_d_in_train_test_mode(tmp_path: Path) -> None:
    train = write_tsvs(make_set(seed=2), tmp_path, "train")
    test = write_tsvs(make_set(n_dialogues=20, seed=3, prefix="t"), tmp_path, "test")
    args = ["evaluate", "--train-judgments", str(train[0]), "--train-evaluations", str(train[1]),
            "--test-judgments", str(test[0]), "--test-evaluations", str(test[1]), "--json",
            "--report", str(tmp_path / "report")]
    tiny = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    result = CliRunner().invoke(app, [*args, *tiny])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert set(summary) >= {"target", "rmse", "pearson", "spearman", "kendall", "baselines", "appendix_d"}
    assert summary["appendix_d"]["linear"]["n"] == summary["n"] == 60
    assert summary["appendix_d"]["linear"]["rmse"] < summary["baselines"]["constant_mean"]["rmse"]
    assert 0 <= summary["appendix_d"]["logistic"]["smooth_ece"] < 1
    assert "SPUR App. D, logistic head" in (tmp_path / "report" / "calibration.md").read_text()


@pytest.mark.parametrize("name", ["distill.calibration.appendix_d", "distill.calibration.baselines",
                                  "distill.calibration.crossval"])
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
