"""Synthetic -> real transfer (the LLM-Rubric paper's "real" columns) on the paper's own rows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from typer.testing import CliRunner

from distill.calibration.cli import app
from distill.calibration.data import CalibrationDataError, CalibrationSet, load_calibration_set
from distill.calibration.network import LLMRubricCalibrator
from distill.calibration.transfer import (
    parse_seeds,
    read_judge_map,
    read_reference_hyperparameters,
    transfer,
)
from monitor.contracts.json_output import strict_json

torch.set_num_threads(1)
DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "llm-rubric"
REAL = DATA / "real"
SYNTH_FILES = (DATA / "human_judges_synth_all_FIXED_ANON.tsv", DATA / "gpt-3.5-turbo-16k_synth_evaluations_FIXED.tsv")
REAL_FILES = (REAL / "human_judges_real_convs_FIXED_ANON.tsv", REAL / "gpt-3.5-turbo-16k_real_evaluations_FIXED.tsv")
JUDGE_MAP, HP = REAL / "judge_map.json", REAL / "best_synth_cross-validation_hp.json"
runner = CliRunner()


def _require() -> None:
    missing = [p for p in (*SYNTH_FILES, *REAL_FILES, JUDGE_MAP, HP) if not p.is_file()]
    if missing:
        pytest.fail(f"shared LLM-Rubric data missing: {missing}; see ../shared/data/README.md")


@pytest.fixture(scope="module")
def sets() -> tuple[CalibrationSet, CalibrationSet]:
    _require()
    synth = load_calibration_set(*SYNTH_FILES, ids=DATA / "synth_dialogue_ids.tsv", drop_incomplete=True)
    real = load_calibration_set(*REAL_FILES, ids=REAL / "real_dialogue_ids.tsv")
    return synth, real


def _reference_model(synth: CalibrationSet, judge_index: dict[str, int] | None, seed: int = 43
                     ) -> LLMRubricCalibrator:
    params = read_reference_hyperparameters(HP, synth)
    return LLMRubricCalibrator(**params, schedule="reference", judge_index=judge_index, random_state=seed,
                               target_index=synth.target_index, n_options=synth.n_options.tolist()
                               ).fit(synth.X, synth.labels, judges=synth.judges)


def test_reference_schedule_reproduces_the_reference_code_and_needs_the_judge_map(sets) -> None:
    synth, real = sets
    assert len(synth) == 660 and synth.notes["incomplete"] == 2  # the reference's dropna rows
    assert len(real) == 223
    judge_map = read_judge_map(JUDGE_MAP)
    y = real.labels[:, real.target_index]
    model = _reference_model(synth, judge_map)
    pred = model.predict(real.X, judges=real.judges)
    # the reference code's own script prints pearson 0.31304, spearman 0.36766 on these rows
    assert stats.pearsonr(y, pred)[0] == pytest.approx(0.31304, abs=5e-4)
    assert stats.spearmanr(y, pred)[0] == pytest.approx(0.36766, abs=5e-4)
    # every real annotator has trained offsets, in the map's row
    assert {str(j) for j in real.judges} <= set(model.judges_.tolist())
    assert all(model.judges_[i] == j for j, i in judge_map.items())
    # a test row answered with another annotator's offsets (or with none) is a different prediction
    rotated = np.roll(model.judges_, 1)
    wrong = dict(zip(model.judges_.tolist(), rotated.tolist(), strict=True))
    other = model.predict(real.X, judges=np.asarray([wrong[str(j)] for j in real.judges]))
    assert abs(stats.pearsonr(y, other)[0] - 0.31304) > 0.02
    assert not np.allclose(model.predict(real.X, judges=None), pred)
    # training without the map puts annotators in other offset rows: another model
    unmapped = _reference_model(synth, None).predict(real.X, judges=real.judges)
    assert abs(stats.pearsonr(y, unmapped)[0] - 0.31304) > 0.02


def test_reference_model_round_trips_through_arrays(sets) -> None:
    synth, real = sets
    model = _reference_model(synth, read_judge_map(JUDGE_MAP))
    arrays, meta = model.to_arrays()
    json.dumps(meta)
    again = LLMRubricCalibrator.from_arrays(arrays, meta)
    np.testing.assert_allclose(again.predict_proba(real.X, judges=real.judges),
                               model.predict_proba(real.X, judges=real.judges), atol=1e-6)


def test_transfer_cli_reports_seeds_spread_and_the_reference_baselines(tmp_path: Path) -> None:
    _require()
    args = ["evaluate", "--train-judgments", str(SYNTH_FILES[0]), "--train-evaluations", str(SYNTH_FILES[1]),
            "--train-ids", str(DATA / "synth_dialogue_ids.tsv"), "--test-judgments", str(REAL_FILES[0]),
            "--test-evaluations", str(REAL_FILES[1]), "--test-ids", str(REAL / "real_dialogue_ids.tsv"),
            "--judge-map", str(JUDGE_MAP), "--hyperparameters", str(HP), "--schedule", "reference",
            "--drop-incomplete", "--seeds", "43-44", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output

    def no_nan(name: str) -> None:
        raise AssertionError(f"bare {name} in JSON output")

    out = json.loads(result.stdout, parse_constant=no_nan)
    assert out["seeds"] == [43, 44] and out["n"] == 223 and out["test_rows_unseen_judge"] == 0
    assert out["per_seed"][0]["pearson"] == pytest.approx(0.31304, abs=5e-4)
    assert out["spread"]["pearson"]["max"] == pytest.approx(out["per_seed"][0]["pearson"])
    assert out["hyperparameters"]["epoch_size"] == 223 and out["hyperparameters"]["judge_map"] is True
    b = out["baselines"]  # the reference code's run_real_data_baselines.sh prints these (RMSE / Pearson)
    assert (b["judge_argmax"]["rmse"], b["judge_argmax"]["pearson"]) == pytest.approx((1.2016, 0.1401), abs=5e-4)
    assert (b["judge_expected"]["rmse"], b["judge_expected"]["pearson"]) == pytest.approx((0.9187, 0.1773),
                                                                                          abs=5e-4)
    assert b["constant_mean"]["pearson"] is None
    assert out["uniform_log_likelihood"] == pytest.approx(-np.log(4))
    text = runner.invoke(app, args[:-1])
    assert text.exit_code == 0 and "| seed 43 |" in text.stdout and "| seed ensemble |" in text.stdout


def test_transfer_counts_test_judges_it_never_trained(sets) -> None:
    synth, real = sets
    strangers = dataclasses.replace(real, judges=np.asarray(["new"] * len(real), dtype=object))
    result = transfer(synth, strangers, params={"pretrain_epochs": 1, "finetune_epochs": 1}, seeds=[43])
    assert result.summary()["test_rows_unseen_judge"] == len(real)


def test_inputs_are_validated(tmp_path: Path, sets) -> None:
    synth, _ = sets
    bad = tmp_path / "map.json"
    bad.write_text('{"1": 0, "2": 2}')
    with pytest.raises(CalibrationDataError, match=r"indices must be 0..1"):
        read_judge_map(bad)
    hp = tmp_path / "hp.json"
    hp.write_text(json.dumps({"input_size": 40, "layer1_size": 25}))
    with pytest.raises(CalibrationDataError, match=r"\[input_size\].*expected 36"):
        read_reference_hyperparameters(hp, synth)
    hp.write_text(json.dumps({"layer1_size": 2.5}))
    with pytest.raises(CalibrationDataError, match=r"\[layer1_size\]"):
        read_reference_hyperparameters(hp, synth)
    hp.write_text(json.dumps({"dropout": 0.1}))
    with pytest.raises(CalibrationDataError, match="unknown key"):
        read_reference_hyperparameters(hp, synth)
    with pytest.raises(ValueError, match="no index for training judge"):
        LLMRubricCalibrator(judge_index={"1": 0}, pretrain_epochs=1, finetune_epochs=1).fit(
            synth.X, synth.labels, judges=synth.judges)
    with pytest.raises(ValueError, match="schedule"):
        LLMRubricCalibrator(schedule="fast").fit(synth.X, synth.labels)
    assert parse_seeds("43-45,44,50") == [43, 44, 45, 50]
    with pytest.raises(ValueError, match="not a seed"):
        parse_seeds("43-x")
    assert strict_json({"a": [float("nan"), np.float32(1.5), np.int64(2)]}) == {"a": [None, 1.5, 2]}
    result = runner.invoke(app, ["evaluate", "--train-judgments", str(SYNTH_FILES[0]), "--train-evaluations",
                                 str(SYNTH_FILES[1]), "--seeds", "43"])
    assert result.exit_code == 2 and "--seeds is the transfer protocol" in result.output
    result = runner.invoke(app, ["evaluate", "--train-judgments", str(SYNTH_FILES[0]), "--train-evaluations",
                                 str(SYNTH_FILES[1]), "--epoch-size", "223"])
    assert result.exit_code == 2 and "only with --schedule reference" in result.output
