"""MiniLM's int8 ONNX backend: same embeddings as torch within a cosine tolerance, the backend setting, and
the skew guard (a model is served with the backend it was trained with)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from distill.featurizers.embedding import DEFAULT_BACKEND, MiniLMFeaturizer
from distill.featurizers.minilm_onnx import build_onnx, onnx_path
from distill.featurizers.spec import embedding_backend_of, featurizer_config, featurizer_from_config, make_featurizer
from monitor.contracts.errors import ConfigError, ModelError
from monitor.contracts.settings import Settings, load_settings

SENTENCES = [
    "thank you so much, that was perfect",
    "this is wrong and useless, you did not answer my question",
    "Can you book me a table for two at an Italian restaurant in the centre?",
    "what is the phone number of the hotel",
    "ok",
    "I need a train to Cambridge on Tuesday leaving after 9:15. " * 30,  # past the 256-token truncation
]


def test_onnx_int8_embeddings_match_torch(onnx_cache: str) -> None:
    onnx = MiniLMFeaturizer(backend="onnx-int8", cache_dir=onnx_cache, batch_size=4).embed(SENTENCES)
    torch = MiniLMFeaturizer(backend="torch").embed(SENTENCES)
    assert onnx.shape == torch.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-4)
    cosine = onnx @ torch.T
    assert cosine.diagonal().min() > 0.95 and cosine.diagonal().mean() > 0.98, cosine.diagonal()
    off_diagonal = cosine[~np.eye(len(SENTENCES), dtype=bool)]
    assert off_diagonal.max() < cosine.diagonal().min() - 0.1  # each text is closest to its own torch embedding
    # Dynamic quantization scales activations per batch, so a text's int8 embedding moves a little with the texts
    # batched beside it (padding adds nothing: masked out); alone it is as close to torch as in a batch.
    alone = np.vstack([MiniLMFeaturizer(backend="onnx-int8", cache_dir=onnx_cache).embed([s]) for s in SENTENCES])
    assert (alone * torch).sum(axis=1).min() > 0.95 and (alone * onnx).sum(axis=1).min() > 0.95


def test_build_is_cached_and_an_unwritable_cache_says_how_to_fix(onnx_cache: str, tmp_path: Path) -> None:
    assert build_onnx(Path(onnx_cache)) == (onnx_path(Path(onnx_cache)), 0.0)  # already built: not rebuilt
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    with pytest.raises(ModelError, match="convmon models build-onnx.*CONVMON_MODEL_CACHE_DIR"):
        MiniLMFeaturizer(cache_dir=str(blocked / "models")).embed(["hello"])


def test_without_a_cache_dir_the_setting_then_the_user_cache_is_used(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CONVMON_MODEL_CACHE_DIR", str(tmp_path / "configured"))
    onnx_path.cache_clear()
    assert onnx_path(None).parent == tmp_path / "configured"
    monkeypatch.delenv("CONVMON_MODEL_CACHE_DIR")
    onnx_path.cache_clear()
    assert onnx_path(None).parent == tmp_path / "xdg" / "convmon" / "models"
    onnx_path.cache_clear()


def test_backend_setting_is_validated_and_defaults_to_the_featurizer_default() -> None:
    assert Settings.model_fields["embedding_backend"].default == DEFAULT_BACKEND == MiniLMFeaturizer().backend
    assert load_settings(embedding_backend="torch").embedding_backend == "torch"
    with pytest.raises(ConfigError, match="CONVMON_EMBEDDING_BACKEND"):
        load_settings(embedding_backend="onnx-fp16")
    with pytest.raises(ConfigError, match="unknown embedding backend 'fp16'"):
        make_featurizer("minilm", backend="fp16")
    union = make_featurizer("hashing+minilm", embedding_backend="torch", model_cache_dir="/somewhere")
    assert union.transformer_list[1][1].backend == "torch" and union.transformer_list[1][1].cache_dir == "/somewhere"


def test_artifacts_record_the_backend_never_the_cache_dir_and_legacy_ones_mean_torch() -> None:
    config = featurizer_config(make_featurizer("minilm", embedding_backend="onnx-int8", model_cache_dir="/x"))
    assert config["parts"][0]["params"]["backend"] == "onnx-int8" and "cache_dir" not in config["parts"][0]["params"]
    legacy = {"name": "hashing+minilm", "parts": [{"name": "hashing", "params": {}},
                                                  {"name": "minilm", "params": {"batch_size": 64, "max_chars": 2000}}]}
    assert embedding_backend_of(legacy) == "torch"
    assert featurizer_from_config(legacy, model_cache_dir="/y").transformer_list[1][1].backend == "torch"
    assert embedding_backend_of({"name": "hashing", "parts": [{"name": "hashing", "params": {}}]}) is None


def test_a_model_is_served_with_the_backend_it_was_trained_with(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from distill.registry import ModelRegistry
    from distill.serving import load_live
    from distill.train import train_items
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.contracts.settings import REPO_ROOT
    from tests.support.model_fixtures import simulated_training_set

    rubric = load_rubric_set("spur-copilot", REPO_ROOT / "prompts")
    data = simulated_training_set(rubric, n=60)
    trained = train_items(data, make_featurizer("minilm", embedding_backend="torch"), rubric=rubric, min_positives=3)
    registry = ModelRegistry(tmp_path)
    version = registry.publish("distilled", trained.model.to_arrays(), trained.model.manifest(), promote=True)
    with caplog.at_level(logging.WARNING, logger="distill.serving"):
        live = load_live(registry, rubric, version, embedding_backend="onnx-int8")
    assert live.featurizer.backend == "torch"  # not the setting's onnx-int8: no train/serve skew
    assert "trained with MiniLM backend 'torch'" in caplog.text
    assert "CONVMON_EMBEDDING_BACKEND='onnx-int8'" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="distill.serving"):
        assert load_live(registry, rubric, version, embedding_backend="torch").featurizer.backend == "torch"
    assert "trained with MiniLM backend" not in caplog.text
