"""``bench minilm-backends``: MiniLM as int8 ONNX vs fp32 torch on the same USS conversations, in one run.

Featurize rate through ``MiniLMFeaturizer.transform`` in the classify stage's batches (``batch``
conversations, each batch's distinct texts embedded once), the two backends back to back per dataset
(which goes first alternates), and the cosine similarity of the two backends' embedding of each text.
The F1 side (``minilm`` beside ``minilm@torch``) is ``bench use``'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from bench.use import load_dataset
from distill.featurizers.embedding import EMBEDDING_BACKENDS, MiniLMFeaturizer
from monitor.contracts.events import Conversation


def _timed(featurizer: MiniLMFeaturizer, conversations: list[Conversation], batch: int
           ) -> tuple[float, dict[str, np.ndarray]]:
    """Seconds to featurize every batch, and each embedded text's vector (captured from the featurizer)."""
    vectors: dict[str, np.ndarray] = {}
    embed = featurizer.embed

    def capture(texts: list[str]) -> np.ndarray:
        out = embed(texts)
        vectors.update(zip(texts, out, strict=True))
        return out

    featurizer.transform(conversations[:8])  # load the model outside the timing
    featurizer.embed = capture  # type: ignore[method-assign]
    started = time.perf_counter()
    for i in range(0, len(conversations), batch):
        featurizer.transform(conversations[i : i + batch])
    return time.perf_counter() - started, vectors


def run_minilm_backends(data_dir: Path, datasets: Sequence[str], *, batch: int = 256, limit: int | None = None,
                        model_cache_dir: str | None = None, progress: Callable[[str], None] | None = None
                        ) -> dict[str, Any]:
    rows = []
    for k, dataset in enumerate(datasets):
        conversations, _ = load_dataset(data_dir, dataset, limit)
        row: dict[str, Any] = {"dataset": dataset, "conversations": len(conversations), "batch": batch}
        vectors = {}
        for backend in (EMBEDDING_BACKENDS if k % 2 else EMBEDDING_BACKENDS[::-1]):
            if progress:
                progress(f"{dataset} {backend}")
            seconds, vectors[backend] = _timed(MiniLMFeaturizer(backend=backend, cache_dir=model_cache_dir),
                                               conversations, batch)
            row[backend] = {"seconds": round(seconds, 2), "conversations_per_s": round(len(conversations) / seconds, 2),
                            "texts_per_s": round(len(vectors[backend]) / seconds, 1)}
        texts = sorted(set(vectors["torch"]) & set(vectors["onnx-int8"]))
        a = np.array([vectors["torch"][t] for t in texts])
        b = np.array([vectors["onnx-int8"][t] for t in texts])
        cosine = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        row["cosine"] = {"texts": len(texts), "mean": round(float(cosine.mean()), 5),
                         "p01": round(float(np.quantile(cosine, 0.01)), 5), "min": round(float(cosine.min()), 5)}
        row["speedup"] = round(row["torch"]["seconds"] / row["onnx-int8"]["seconds"], 2)
        rows.append(row)
    return {"results": rows}


def minilm_backends_table(result: dict[str, Any]) -> Table:
    table = Table(title="MiniLM: int8 ONNX vs fp32 torch (same conversations, one run)")
    for col in ("dataset", "conversations", "torch conv/s", "onnx-int8 conv/s", "speed-up", "cosine mean / p01 / min"):
        table.add_column(col)
    for r in result["results"]:
        c = r["cosine"]
        table.add_row(r["dataset"], str(r["conversations"]), str(r["torch"]["conversations_per_s"]),
                      str(r["onnx-int8"]["conversations_per_s"]), f"{r['speedup']}x",
                      f"{c['mean']:.4f} / {c['p01']:.4f} / {c['min']:.4f}")
    return table
