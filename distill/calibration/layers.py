"""The LLM-Rubric network itself (torch): per-judge offset layers and the NA-masked loss.

Kept apart from :class:`distill.calibration.network.LLMRubricCalibrator`, the estimator that trains,
validates and stores it, so the maths of Hashemi et al. (ACL 2024) reads on one page:
``z1 = sigmoid((W1 + W1[a]) [1; x])``, ``z2 = sigmoid((W2 + W2[a]) [1; z1])``,
``p_a(y_q | x) = softmax((V_q + V_q[a]) [1; z2])``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

_NEG = -1e9


class LLMRubricNetwork(nn.Module):
    """Two sigmoid layers and one softmax head per question, each with per-judge additive offsets."""

    option_mask: torch.Tensor  # a buffer: which options each question has

    def __init__(self, n_questions: int, max_options: int, n_judges: int, hidden1: int, hidden2: int,
                 option_mask: torch.Tensor, personalized: bool = True, random_offsets: bool = False) -> None:
        super().__init__()
        d_in = n_questions * max_options
        self.personalized = personalized
        n_off = max(n_judges, 1)
        # created in the reference's order, so a seed draws the same numbers as its code
        offset = torch.randn if random_offsets else torch.zeros
        self.W1 = nn.Parameter(torch.randn(d_in + 1, hidden1))
        self.W1a = nn.Parameter(offset(n_off, d_in + 1, hidden1))
        self.W2 = nn.Parameter(torch.randn(hidden1 + 1, hidden2))
        self.W2a = nn.Parameter(offset(n_off, hidden1 + 1, hidden2))
        self.V = nn.Parameter(torch.randn(n_questions, hidden2 + 1, max_options))
        self.Va = nn.Parameter(offset(n_off, n_questions, hidden2 + 1, max_options))
        self.register_buffer("option_mask", option_mask.bool())

    @staticmethod
    def _with_bias(h: torch.Tensor) -> torch.Tensor:
        return torch.cat([h, torch.ones(h.shape[0], 1, dtype=h.dtype)], dim=1)

    def _offset(self, table: torch.Tensor, judge: torch.Tensor) -> torch.Tensor:
        known = (judge >= 0).to(table.dtype).view(-1, *([1] * (table.dim() - 1)))
        return table[judge.clamp(min=0)] * known

    def forward(self, x: torch.Tensor, judge: torch.Tensor) -> torch.Tensor:
        """Logits ``[batch, n_questions, max_options]``; padded options get a large negative logit."""
        h = self._with_bias(x.flatten(1))
        if self.personalized:
            h = torch.sigmoid(torch.einsum("bi,bio->bo", h, self.W1 + self._offset(self.W1a, judge)))
            h = self._with_bias(h)
            h = torch.sigmoid(torch.einsum("bi,bio->bo", h, self.W2 + self._offset(self.W2a, judge)))
            logits = torch.einsum("bi,bqio->bqo", self._with_bias(h), self.V + self._offset(self.Va, judge))
        else:
            h = self._with_bias(torch.sigmoid(h @ self.W1))
            h = self._with_bias(torch.sigmoid(h @ self.W2))
            logits = torch.einsum("bi,qio->bqo", h, self.V)
        return logits.masked_fill(~self.option_mask, _NEG)


def masked_nll(logits: torch.Tensor, y: torch.Tensor, questions: Sequence[int] | None = None, *,
               over_all_cells: bool = False) -> torch.Tensor:
    """Mean negative log-likelihood over valid labels only (``y`` is 1..K, 0 = NA).

    ``over_all_cells`` divides by every (row, question) cell instead, NA cells adding zero: the
    reference code's loss, which weighs a batch with many NA answers less.
    """
    if questions is not None:
        logits, y = logits[:, list(questions)], y[:, list(questions)]
    nll = nn.functional.cross_entropy(logits.permute(0, 2, 1), y - 1, ignore_index=-1, reduction="none")
    if over_all_cells:
        return nll.mean()
    valid = (y > 0).to(nll.dtype)
    return (nll * valid).sum() / valid.sum().clamp(min=1.0)
