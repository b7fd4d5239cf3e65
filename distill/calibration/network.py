"""The LLM-Rubric calibration network (Hashemi et al., ACL 2024) as a scikit-learn-style estimator.

Raw judge answers are not probabilities of what a given person feels. The network reads the judge's
answer distributions for *every* rubric question and predicts each label source's answer
distribution for every question, through two sigmoid layers whose weights are the sum of shared
weights and judge-specific offsets: ``z1 = sigmoid((W1 + W1[a]) [1; x])``,
``z2 = sigmoid((W2 + W2[a]) [1; z1])``, ``p_a(y_q | x) = softmax((V_q + V_q[a]) [1; z2])``.
The offsets start at zero and only move for judges seen in training, so an unseen judge (or
``judges=None``) gets the shared model. Training is multi-task pre-training on all questions, then
fine-tuning on the target; NA labels are masked out (mean over valid labels only).

``schedule="reference"`` trains as the paper's released PyTorch code does, so its published
synthetic -> real numbers can be reproduced: offsets drawn from N(0, 1) like the shared weights (in
the order judge index -> offset row given by ``judge_index``, the reference's ``judge_map.json``),
``epochs * int(epoch_size / batch_size)`` steps per phase on batches drawn with replacement
(numpy's legacy generator, reseeded per phase), the loss averaged over every (row, question) cell
with NA cells counting zero, and no option mask (a 3-option question keeps a 4th logit).

References
----------
Hashemi, Eisner, Rosset, Van Durme, Kedzie. "LLM-Rubric: A Multidimensional, Calibrated Approach
to Automated Evaluation of Natural Language Texts." ACL 2024. github.com/microsoft/LLM-Rubric
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from distill.calibration.layers import LLMRubricNetwork, masked_nll
from monitor.contracts.errors import ModelError

__all__ = ["LLMRubricCalibrator", "calibrated_satisfaction", "satisfied_probability"]

_PARAMS = ("W1", "W1a", "W2", "W2a", "V", "Va")
SCHEDULES = ("convmon", "reference")


class LLMRubricCalibrator:
    """Predict a label source's answer distribution for a target question from judge distributions.

    ``fit(X, y, judges=...)`` takes ``X [n, n_questions, max_options]`` (one row per label, the
    dialogue's judge distributions), ``y [n, n_questions]`` (1..K, 0 = not applicable) and the label
    source of every row (None: the row trains the shared weights only). ``predict_proba`` returns
    ``(n_samples, n_classes)`` for the target; ``predict`` the expected value, e.g. an expected 1-4
    satisfaction.

    >>> rng = np.random.default_rng(0)
    >>> X = rng.dirichlet(np.ones(4), size=(40, 2)).astype("float32")
    >>> y = np.stack([X[:, 0].argmax(1) + 1, X[:, 1].argmax(1) + 1], axis=1)
    >>> model = LLMRubricCalibrator(pretrain_epochs=2, finetune_epochs=2).fit(X, y)
    >>> model.predict_proba(X[:3]).shape
    (3, 4)
    """

    def __init__(self, *, hidden1: int = 25, hidden2: int = 25, learning_rate: float = 1e-3,
                 batch_size: int = 64, pretrain_epochs: int = 20, finetune_epochs: int = 30,
                 weight_decay: float = 0.0, personalized: bool = True, target_index: int = -1,
                 n_options: Sequence[int] | None = None, random_state: int = 43, schedule: str = "convmon",
                 epoch_size: int | None = None, judge_index: Mapping[str, int] | None = None) -> None:
        self.hidden1 = hidden1
        self.hidden2 = hidden2
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.pretrain_epochs = pretrain_epochs
        self.finetune_epochs = finetune_epochs
        self.weight_decay = weight_decay
        self.personalized = personalized
        self.target_index = target_index
        self.n_options = n_options
        self.random_state = random_state
        self.schedule = schedule
        self.epoch_size = epoch_size
        self.judge_index = judge_index

    # -- parameters -----------------------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _HYPER}

    def set_params(self, **params: Any) -> LLMRubricCalibrator:
        for k, v in params.items():
            if k not in _HYPER:
                raise ValueError(f"Invalid parameter {k!r} for LLMRubricCalibrator. Valid: {', '.join(_HYPER)}.")
            setattr(self, k, v)
        return self

    def _validate(self, X: np.ndarray, y: np.ndarray) -> None:
        for name in ("hidden1", "hidden2", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"The {name!r} parameter of LLMRubricCalibrator must be an int >= 1. "
                                 f"Got {getattr(self, name)!r} instead.")
        for name in ("pretrain_epochs", "finetune_epochs"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"The {name!r} parameter of LLMRubricCalibrator must be an int >= 0. "
                                 f"Got {getattr(self, name)!r} instead.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"The 'schedule' parameter of LLMRubricCalibrator must be one of "
                             f"{', '.join(SCHEDULES)}. Got {self.schedule!r} instead.")
        if self.epoch_size is not None and (not isinstance(self.epoch_size, int) or self.epoch_size < 1):
            raise ValueError("The 'epoch_size' parameter of LLMRubricCalibrator must be an int >= 1 or None. "
                             f"Got {self.epoch_size!r} instead.")
        if not self.learning_rate > 0:
            raise ValueError("The 'learning_rate' parameter of LLMRubricCalibrator must be a float in "
                             f"(0, inf). Got {self.learning_rate!r} instead.")
        if X.ndim != 3 or y.shape != X.shape[:2]:
            raise ValueError(f"X must be (n_samples, n_questions, max_options) and y (n_samples, "
                             f"n_questions); got X {X.shape} and y {y.shape}.")

    # -- fitting --------------------------------------------------------------------------------
    def _judge_tensor(self, judges: Sequence[Any] | np.ndarray | None, n: int) -> torch.Tensor:
        if judges is None:
            return torch.full((n,), -1, dtype=torch.long)
        pos = {j: i for i, j in enumerate(self.judges_.tolist())}
        return torch.tensor([pos.get(str(j), -1) for j in judges], dtype=torch.long)

    def fit(self, X: np.ndarray, y: np.ndarray, *, judges: Sequence[Any] | np.ndarray | None = None
            ) -> LLMRubricCalibrator:
        X, y = np.asarray(X, dtype=np.float32), np.asarray(y, dtype=np.int64)
        self._validate(X, y)
        n, n_q, k = X.shape
        self.n_options_ = np.asarray(self.n_options if self.n_options is not None else [k] * n_q)
        if self.n_options_.shape != (n_q,) or self.n_options_.max() > k:
            raise ValueError(f"n_options must give one count <= {k} per question; got {self.n_options}.")
        if (y < 0).any() or (y > self.n_options_[None, :]).any():
            raise ValueError("y must hold answers in 1..n_options per question (0 = not applicable).")
        self.target_ = int(range(n_q)[self.target_index])
        if not (y[:, self.target_] > 0).any():
            raise ValueError("y has no valid label for the target question; nothing to fine-tune on.")
        self.judges_ = self._judge_order(judges)
        self.classes_ = np.arange(1, int(self.n_options_[self.target_]) + 1)
        reference = self.schedule == "reference"
        torch.manual_seed(self.random_state)
        mask = torch.arange(k)[None, :] < torch.as_tensor(self.n_options_)[:, None]
        self.network_ = LLMRubricNetwork(n_q, k, len(self.judges_), self.hidden1, self.hidden2,
                                         torch.ones_like(mask) if reference else mask, self.personalized,
                                         random_offsets=reference)
        xt, yt, jt = torch.from_numpy(X), torch.from_numpy(y), self._judge_tensor(judges, n)
        gen = torch.Generator().manual_seed(self.random_state)
        opt = torch.optim.Adam(self.network_.parameters(), lr=self.learning_rate,
                               weight_decay=self.weight_decay)
        self.network_.train()
        for epochs, questions in ((self.pretrain_epochs, None), (self.finetune_epochs, [self.target_])):
            if reference:  # fixed step count, batches with replacement, numpy's generator reseeded per phase
                draw = np.random.RandomState(self.random_state)
                steps = epochs * ((self.epoch_size or n) // self.batch_size)
                batches = (torch.from_numpy(draw.choice(n, size=self.batch_size)) for _ in range(steps))
            else:
                batches = (idx for _ in range(epochs)
                           for idx in torch.split(torch.randperm(n, generator=gen), self.batch_size))
            for idx in batches:
                loss = masked_nll(self.network_(xt[idx], jt[idx]), yt[idx], questions, over_all_cells=reference)
                opt.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]  # torch.Tensor.backward is unannotated
                opt.step()
        self.network_.eval()
        return self

    def _judge_order(self, judges: Sequence[Any] | np.ndarray | None) -> np.ndarray:
        """Label source per offset row: sorted ids, or ``judge_index``'s order when one is given.

        A row whose judge is None trains the shared weights only (the model served without a judge).
        """
        seen = {str(j) for j in judges if j is not None} if judges is not None else set()
        if self.judge_index is None:
            return np.asarray(sorted(seen), dtype=str)
        index = {str(j): i for j, i in self.judge_index.items()}
        if sorted(index.values()) != list(range(len(index))):
            raise ValueError("judge_index must map judge ids to the indices 0..n-1, each once; got "
                             f"{sorted(index.values())}.")
        missing = sorted(seen - set(index))
        if missing:
            raise ValueError(f"judge_index has no index for training judge(s) {', '.join(missing[:10])}.")
        return np.asarray(sorted(index, key=index.__getitem__), dtype=str)

    # -- prediction -----------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "network_"):
            raise ModelError("This LLMRubricCalibrator instance is not fitted yet. Call 'fit' or "
                             "'from_arrays' before using this estimator.")

    def predict_proba_all(self, X: np.ndarray, *, judges: Sequence[Any] | np.ndarray | None = None
                          ) -> np.ndarray:
        """Answer distributions for every question: ``[n_samples, n_questions, max_options]``."""
        self._check_fitted()
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 3 or X.shape[1:] != (len(self.n_options_), self.network_.option_mask.shape[1]):
            raise ValueError(f"X must have shape (n_samples, {len(self.n_options_)}, "
                             f"{self.network_.option_mask.shape[1]}); got {X.shape}.")
        with torch.no_grad():
            logits = self.network_(torch.from_numpy(X), self._judge_tensor(judges, len(X)))
            return torch.softmax(logits, dim=-1).numpy()

    def predict_proba(self, X: np.ndarray, *, judges: Sequence[Any] | np.ndarray | None = None) -> np.ndarray:
        return self.predict_proba_all(X, judges=judges)[:, self.target_, : len(self.classes_)]

    def predict(self, X: np.ndarray, *, judges: Sequence[Any] | np.ndarray | None = None) -> np.ndarray:
        """Expected answer of the target question (the full distribution is in ``predict_proba``)."""
        return self.predict_proba(X, judges=judges) @ self.classes_.astype(np.float64)

    def log_likelihood(self, X: np.ndarray, y: np.ndarray, *, judges: Sequence[Any] | None = None) -> float:
        """Mean log-likelihood of the valid target labels in ``y`` (the CV selection criterion)."""
        y_t = np.asarray(y)[:, self.target_]
        p = self.predict_proba(X, judges=judges)[y_t > 0, y_t[y_t > 0] - 1]
        return float(np.mean(np.log(np.clip(p, 1e-12, None))))

    # -- artifacts ------------------------------------------------------------------------------
    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Weights as plain arrays plus a JSON-able manifest: no pickle, loading runs no code."""
        self._check_fitted()
        arrays = {name: getattr(self.network_, name).detach().numpy().copy() for name in _PARAMS}
        arrays |= {"n_options": self.n_options_.astype(np.int64), "judges": self.judges_.astype(str)}
        meta = {"format": "llm-rubric-calibrator/1", "target_index": self.target_,
                "hyperparameters": {k: v for k, v in self.get_params().items()
                                    if k not in ("n_options", "judge_index")}}  # judges: the offset rows' order
        return arrays, meta

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> LLMRubricCalibrator:
        if meta.get("format") != "llm-rubric-calibrator/1":
            raise ModelError(f"unsupported calibration artifact format {meta.get('format')!r}; "
                             "expected 'llm-rubric-calibrator/1'")
        missing = [k for k in (*_PARAMS, "n_options", "judges") if k not in arrays]
        if missing:
            raise ModelError(f"calibration artifact lacks array(s) {', '.join(missing)}")
        model = cls(**{**meta["hyperparameters"], "n_options": arrays["n_options"].tolist()})
        n_q, k = arrays["V"].shape[0], arrays["V"].shape[2]
        model.n_options_, model.judges_ = arrays["n_options"].astype(np.int64), arrays["judges"].astype(str)
        model.target_ = int(meta["target_index"])
        model.classes_ = np.arange(1, int(model.n_options_[model.target_]) + 1)
        mask = torch.arange(k)[None, :] < torch.as_tensor(model.n_options_)[:, None]
        if model.schedule == "reference":
            mask = torch.ones_like(mask)
        model.network_ = LLMRubricNetwork(n_q, k, len(model.judges_), model.hidden1, model.hidden2, mask,
                                          model.personalized)
        try:
            state = {n: torch.from_numpy(np.asarray(arrays[n], dtype=np.float32)) for n in _PARAMS}
            model.network_.load_state_dict(state | {"option_mask": mask})
        except RuntimeError as exc:
            raise ModelError(f"calibration artifact arrays do not match its manifest: {exc}") from exc
        model.network_.eval()
        return model


_HYPER = tuple(inspect.signature(LLMRubricCalibrator.__init__).parameters)[1:]


def satisfied_probability(proba: np.ndarray, classes: np.ndarray, *, threshold: int = 3) -> np.ndarray:
    """P(answer >= threshold) per row: with 1-4 satisfaction, P(satisfied) = P(3) + P(4).

    The monitor sums these over conversations (an expected count) instead of counting argmaxes, so
    the exported rate is calibrated, not biased toward the majority answer.
    """
    satisfied: np.ndarray = np.asarray(proba)[:, np.asarray(classes) >= threshold].sum(axis=1)
    return satisfied


def calibrated_satisfaction(model: LLMRubricCalibrator, questions: Sequence[str],
                            evaluations: Sequence[Mapping[str, Sequence[float]]], *,
                            judges: Sequence[str] | None = None, threshold: int = 3) -> np.ndarray:
    """P(satisfied) for judge-scored conversations, ready to be summed into an expected rate.

    ``questions`` is the artifact manifest's question order; each item of ``evaluations`` maps a
    question to the judge's option distribution (a missing question is "not asked": zeros).
    """
    k = int(model.network_.option_mask.shape[1]) if hasattr(model, "network_") else 0
    X = np.zeros((len(evaluations), len(questions), k), dtype=np.float32)
    for i, ev in enumerate(evaluations):
        for q, name in enumerate(questions):
            dist = np.asarray(ev.get(name, ()), dtype=np.float32)
            if len(dist) > model.n_options_[q]:
                raise ValueError(f"conversation {i}: {len(dist)} probabilities for {name}, which has "
                                 f"{model.n_options_[q]} options")
            X[i, q, : len(dist)] = dist
    return satisfied_probability(model.predict_proba(X, judges=judges), model.classes_, threshold=threshold)
