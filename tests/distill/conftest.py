"""Fixtures of the distill tests: the int8 ONNX MiniLM, built once per session into a temporary directory."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

log = logging.getLogger(__name__)


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A model cache directory holding the int8 ONNX MiniLM (export + quantization: ~10 s of CPU)."""
    from distill.featurizers.minilm_onnx import build_onnx

    cache = tmp_path_factory.mktemp("model-cache")
    path, seconds = build_onnx(Path(cache))
    log.warning("built %s in %.1f s", path.name, seconds)
    return str(cache)
