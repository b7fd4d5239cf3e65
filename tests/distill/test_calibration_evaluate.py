"""Metrics, grouped folds, baselines and the cross-validated comparison on the paper's data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from distill.calibration.baselines import ConstantMeanBaseline, JudgeArgmaxBaseline, JudgeExpectedBaseline
from distill.calibration.crossval import dialogue_folds, evaluate, grid_search, score, smooth_ece
from distill.calibration.data import load_calibration_set
from distill.calibration.summary import render_markdown, write_report

torch.set_num_threads(1)
DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "llm-rubric"
FAST = {"pretrain_epochs": 5, "finetune_epochs": 10}


def synthetic_set():
    files = [DATA / "human_judges_synth_all_FIXED_ANON.tsv", DATA / "gpt-3.5-turbo-16k_synth_evaluations_FIXED.tsv"]
    if not all(p.is_file() for p in files):
        pytest.fail(f"shared LLM-Rubric data missing under {DATA}; see ../shared/data/README.md")
    return load_calibration_set(*files, ids=DATA / "synth_dialogue_ids.tsv")


def test_smooth_ece_separates_calibrated_from_overconfident() -> None:
    rng = np.random.default_rng(0)
    f = rng.uniform(size=4000)
    y = rng.uniform(size=4000) < f
    assert smooth_ece(f, y) < 0.03
    assert smooth_ece(np.clip(f * 1.6 - 0.3, 0, 1), y) > 0.08
    assert smooth_ece(np.full(500, 0.9), np.zeros(500)) == pytest.approx(0.9, abs=0.05)


def test_score_matches_scipy_and_numpy() -> None:
    y = np.array([1, 2, 3, 4, 4, 3])
    pred = np.array([1.5, 2.0, 2.5, 3.9, 3.0, 3.1])
    proba = np.full((6, 4), 0.25)
    s = score(y, pred, proba, np.arange(1, 5))
    assert s["rmse"] == pytest.approx(np.sqrt(np.mean((y - pred) ** 2)))
    assert s["kendall"] == pytest.approx(stats.kendalltau(y, pred)[0])
    assert s["log_likelihood"] == pytest.approx(np.log(0.25))
    assert np.isnan(score(y, np.full(6, 3.0), None, np.arange(1, 5))["pearson"])


def test_folds_keep_each_dialogue_in_one_fold_and_are_balanced() -> None:
    groups = np.repeat([f"d{i}" for i in range(23)], 3)
    folds = dialogue_folds(groups, n_splits=5, random_state=1)
    for g in set(groups):
        assert len(set(folds[groups == g])) == 1
    assert sorted(np.bincount(folds).tolist()) == [12, 12, 15, 15, 15]
    with pytest.raises(ValueError, match="Cannot make 5 folds from 2 dialogues"):
        dialogue_folds(["a", "b"], n_splits=5)


def test_judge_baselines_read_the_target_distribution() -> None:
    X = np.zeros((2, 2, 4))
    X[:, 1] = [[0.1, 0.2, 0.3, 0.4], [0.5, 0.0, 0.0, 0.0]]
    y = np.array([[1, 4], [2, 2]])
    assert JudgeArgmaxBaseline().fit(X, y).predict(X).tolist() == [4.0, 1.0]
    assert JudgeExpectedBaseline().fit(X, y).predict(X).tolist() == pytest.approx([3.0, 1.0])
    const = ConstantMeanBaseline().fit(X, y)
    assert const.predict(X).tolist() == [3.0, 3.0]
    assert const.predict_proba(X)[0].tolist() == [0, 0.5, 0, 0.5]


def test_llm_rubric_beats_every_baseline_in_grouped_cv(tmp_path: Path) -> None:
    data = synthetic_set()
    ev = evaluate(data, params=FAST)
    s = ev.scores
    assert s["llm_rubric"]["n"] == 662
    for name in ("random", "judge_argmax", "judge_expected", "constant_mean", "llm_rubric_shared_only"):
        assert s["llm_rubric"]["rmse"] < s[name]["rmse"], name
    assert s["llm_rubric"]["pearson"] > 0.3
    assert s["judge_expected"]["rmse"] < s["judge_argmax"]["rmse"] < s["random"]["rmse"]
    assert 0.80 < s["constant_mean"]["rmse"] < 0.85  # label std on the 1-4 scale
    # SPUR Appendix D on rubric scores, one head for all annotators: above the mean, below personalization
    assert s["appendix_d_linear"]["n"] == s["appendix_d_logistic"]["n"] == 662
    assert s["llm_rubric"]["rmse"] < s["appendix_d_linear"]["rmse"] < s["constant_mean"]["rmse"]
    assert s["appendix_d_logistic"]["roc_auc"] > 0.55
    summary = ev.summary()
    assert summary["target"] == "Q0" and set(summary["baselines"]) >= {"random", "constant_mean"}
    assert summary["appendix_d"]["linear"]["rmse"] == s["appendix_d_linear"]["rmse"]
    md, png = write_report(ev, tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| LLM-Rubric (personalized) |" in md.read_text() and "0.396" in render_markdown(ev)


def test_grid_search_ranks_by_held_out_log_likelihood() -> None:
    data = synthetic_set()
    folds = dialogue_folds(data.groups)
    ranked = grid_search(data, {"finetune_epochs": [0, 10]}, folds,
                         base={"pretrain_epochs": 5, "target_index": -1, "n_options": data.n_options.tolist()})
    assert [p["finetune_epochs"] for p, _ in ranked] == [10, 0]
    assert ranked[0][1] > ranked[1][1]
