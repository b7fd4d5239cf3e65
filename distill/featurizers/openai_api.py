"""Embeddings from an OpenAI-compatible ``/embeddings`` endpoint, batched and cached by content hash.

The cache key is ``sha256(model, dimensions, text)``, so a repeated turn ("thanks!") costs one
request across batches and retraining runs; with ``cache_dir`` set, vectors persist as ``.npy``
files (loaded with ``allow_pickle=False``). The client is injected (the CLI builds it from
Settings), so tests pass an ``httpx.MockTransport`` and nothing here reads the environment.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from distill.featurizers.embedding import EmbeddingFeaturizer
from monitor.contracts.errors import ConfigError, ModelError


class OpenAIFeaturizer(EmbeddingFeaturizer):
    """Pooled OpenAI embeddings; ``client`` is an ``openai.OpenAI`` instance (required to transform)."""

    name = "openai"

    def __init__(
        self,
        *,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        batch_size: int = 128,
        cache_dir: str | None = None,
        client: Any = None,
    ) -> None:
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.cache_dir = cache_dir
        self.client = client

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\x00{self.dimensions}\x00{text}".encode()).hexdigest()

    def _cache(self) -> dict[str, np.ndarray]:
        if not hasattr(self, "_memory"):
            self._memory: dict[str, np.ndarray] = {}
        return self._memory

    def _lookup(self, key: str) -> np.ndarray | None:
        memory = self._cache()
        if key in memory:
            return memory[key]
        if self.cache_dir is not None:
            path = Path(self.cache_dir) / f"{key}.npy"
            if path.is_file():
                memory[key] = np.load(path, allow_pickle=False)
                return memory[key]
        return None

    def _store(self, key: str, vector: np.ndarray) -> None:
        self._cache()[key] = vector
        if self.cache_dir is not None:
            Path(self.cache_dir).mkdir(parents=True, exist_ok=True)
            np.save(Path(self.cache_dir) / f"{key}.npy", vector, allow_pickle=False)

    def _request(self, texts: list[str]) -> list[np.ndarray]:
        kwargs: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        try:
            response = self.client.embeddings.create(**kwargs)
        except Exception as exc:  # noqa: BLE001 - the openai client raises many types; wrap them all
            raise ModelError(f"embeddings request to model {self.model!r} failed: {exc}") from exc
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(texts):
            raise ModelError(f"embeddings endpoint returned {len(data)} vectors for {len(texts)} inputs")
        vectors = [np.asarray(d.embedding, dtype=np.float32) for d in data]
        return [v / max(float(np.linalg.norm(v)), 1e-12) for v in vectors]

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.client is None:
            raise ConfigError(
                "OpenAIFeaturizer needs an OpenAI client: pass client=openai.OpenAI(...) "
                "(the CLI builds one from OPENAI_API_KEY / OPENAI_BASE_URL)"
            )
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigError(
                f"The 'batch_size' parameter of OpenAIFeaturizer must be an int >= 1. Got {self.batch_size!r} instead."
            )
        keys = [self._key(t) for t in texts]
        missing = [i for i, k in enumerate(keys) if self._lookup(k) is None]
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start : start + self.batch_size]
            for i, vector in zip(chunk, self._request([texts[i] for i in chunk]), strict=True):
                self._store(keys[i], vector)
        return np.stack([self._cache()[k] for k in keys])

    def _dim_hint(self) -> int:
        return self.dimensions or 1536
