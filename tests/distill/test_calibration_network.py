"""The LLM-Rubric network: judge offsets, masking, decoding, determinism and artifacts."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from distill.calibration.layers import masked_nll
from distill.calibration.network import LLMRubricCalibrator, satisfied_probability
from monitor.contracts.errors import ModelError

torch.set_num_threads(1)


def toy(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two questions (Q8-like 3 options, then a 4-option target); judge 'hi' answers one notch higher."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, 2, 4), dtype=np.float32)
    X[:, 0, :3] = rng.dirichlet(np.ones(3), size=n)
    X[:, 1] = rng.dirichlet(np.ones(4), size=n)
    judges = rng.choice(["lo", "hi"], size=n)
    base = X[:, 1].argmax(1) + 1
    target = np.clip(base + (judges == "hi") * 2 - 1, 1, 4)
    y = np.stack([X[:, 0, :3].argmax(1) + 1, target], axis=1)
    y[::7, 0] = 0  # not applicable
    return X, y, judges


FAST = {"pretrain_epochs": 15, "finetune_epochs": 25, "learning_rate": 0.01, "batch_size": 32,
        "n_options": [3, 4]}


def test_judge_offsets_start_at_zero_and_unseen_judges_get_the_shared_model() -> None:
    X, y, judges = toy()
    untrained = LLMRubricCalibrator(pretrain_epochs=0, finetune_epochs=0, n_options=[3, 4]).fit(X, y,
                                                                                             judges=judges)
    for name in ("W1a", "W2a", "Va"):
        assert torch.count_nonzero(getattr(untrained.network_, name)) == 0
    model = LLMRubricCalibrator(**FAST).fit(X, y, judges=judges)
    assert torch.count_nonzero(model.network_.Va) > 0  # judges did learn offsets
    shared = model.predict_proba(X[:5])
    np.testing.assert_allclose(model.predict_proba(X[:5], judges=["never-seen"] * 5), shared)
    assert not np.allclose(model.predict_proba(X[:5], judges=["hi"] * 5), shared)


def test_personalization_learns_each_judges_bias() -> None:
    X, y, judges = toy(240)
    model = LLMRubricCalibrator(**FAST).fit(X, y, judges=judges)
    hi = model.predict(X, judges=["hi"] * len(X)).mean()
    lo = model.predict(X, judges=["lo"] * len(X)).mean()
    assert hi - lo > 1.0  # true gap is 2 notches, minus clipping at the scale ends
    shared = LLMRubricCalibrator(**FAST, personalized=False).fit(X, y, judges=judges)
    err = lambda m: np.sqrt(np.mean((m.predict(X, judges=judges) - y[:, 1]) ** 2))  # noqa: E731
    assert err(model) < err(shared) - 0.2


def test_padded_options_get_no_mass_and_predict_is_the_expected_value() -> None:
    X, y, judges = toy()
    model = LLMRubricCalibrator(**FAST).fit(X, y, judges=judges)
    full = model.predict_proba_all(X, judges=judges)
    assert full.shape == (len(X), 2, 4)
    assert np.abs(full[:, 0, 3]).max() < 1e-12  # Q8-like question has only 3 options
    np.testing.assert_allclose(full.sum(axis=2), 1.0, atol=1e-5)
    proba = model.predict_proba(X, judges=judges)
    assert proba.shape == (len(X), 4) and model.classes_.tolist() == [1, 2, 3, 4]
    np.testing.assert_allclose(model.predict(X, judges=judges), proba @ np.array([1.0, 2, 3, 4]))
    np.testing.assert_allclose(satisfied_probability(proba, model.classes_), proba[:, 2] + proba[:, 3])


def test_masked_loss_is_a_mean_over_valid_labels_only() -> None:
    logits = torch.tensor([[[2.0, 0.0]], [[0.0, 2.0]], [[5.0, -5.0]]])
    y = torch.tensor([[1], [1], [0]])
    expected = (torch.log1p(torch.exp(torch.tensor(-2.0))) + torch.log1p(torch.exp(torch.tensor(2.0)))) / 2
    torch.testing.assert_close(masked_nll(logits, y), expected)
    y_changed_na = torch.tensor([[1], [1], [0]])
    logits_changed_na = logits.clone()
    logits_changed_na[2] = torch.tensor([[-50.0, 50.0]])
    torch.testing.assert_close(masked_nll(logits_changed_na, y_changed_na), expected)


def test_same_seed_same_model_and_other_seed_differs() -> None:
    X, y, judges = toy()
    a = LLMRubricCalibrator(**FAST).fit(X, y, judges=judges).predict_proba(X, judges=judges)
    b = LLMRubricCalibrator(**FAST).fit(X, y, judges=judges).predict_proba(X, judges=judges)
    c = LLMRubricCalibrator(**FAST, random_state=7).fit(X, y, judges=judges).predict_proba(X, judges=judges)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_artifact_round_trip_is_arrays_and_json(tmp_path) -> None:
    X, y, judges = toy()
    model = LLMRubricCalibrator(**FAST).fit(X, y, judges=judges)
    arrays, meta = model.to_arrays()
    np.savez(tmp_path / "w.npz", **arrays)
    (tmp_path / "m.json").write_text(json.dumps(meta))
    with np.load(tmp_path / "w.npz", allow_pickle=False) as npz:
        loaded = LLMRubricCalibrator.from_arrays(dict(npz), json.loads((tmp_path / "m.json").read_text()))
    np.testing.assert_array_equal(loaded.predict_proba(X, judges=judges), model.predict_proba(X, judges=judges))
    assert loaded.get_params() == model.get_params() | {"n_options": [3, 4]}
    with pytest.raises(ModelError, match="unsupported calibration artifact format"):
        LLMRubricCalibrator.from_arrays(arrays, {**meta, "format": "pickle"})
    with pytest.raises(ModelError, match="lacks array\\(s\\) Va"):
        LLMRubricCalibrator.from_arrays({k: v for k, v in arrays.items() if k != "Va"}, meta)
    with pytest.raises(ModelError, match="do not match its manifest"):
        LLMRubricCalibrator.from_arrays(arrays, {**meta, "hyperparameters": {**meta["hyperparameters"],
                                                                             "hidden1": 7}})


def test_parameter_and_input_errors() -> None:
    X, y, judges = toy(20)
    with pytest.raises(ValueError, match="The 'hidden1' parameter of LLMRubricCalibrator must be an int >= 1. "
                                         "Got 0 instead."):
        LLMRubricCalibrator(hidden1=0).fit(X, y)
    with pytest.raises(ValueError, match="'learning_rate' parameter .* Got -1 instead"):
        LLMRubricCalibrator(learning_rate=-1).fit(X, y)
    with pytest.raises(ValueError, match="y must hold answers in 1..n_options"):
        LLMRubricCalibrator(n_options=[2, 4]).fit(X, y)
    with pytest.raises(ModelError, match="not fitted yet"):
        LLMRubricCalibrator().predict(X)
    with pytest.raises(ValueError, match="Invalid parameter 'hidden3'"):
        LLMRubricCalibrator().set_params(hidden3=1)
