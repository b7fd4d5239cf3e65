"""Featurizers with the scikit-learn transformer API: ``transform(list[Conversation]) -> matrix``.

Named by a spec string (Settings.featurizer): ``hashing``, ``minilm``, ``openai``, ``shape`` (the
conversation's length, only useful beside a text featurizer), ``lexicon`` (twelve conversation cues:
thanks, praise, negative words, assistant apologies, questions, length) or a concatenation such as
``hashing+minilm`` or ``hashing+shape`` (a :class:`~sklearn.pipeline.FeatureUnion`). A model
artifact stores :func:`featurizer_config` (names and JSON parameters, never objects) and workers
rebuild the same featurizer with :func:`featurizer_from_config`. MiniLM's backend (``onnx-int8`` or
``torch``) is such a parameter: an artifact is served with the backend it was trained with.
"""

from __future__ import annotations

from typing import Any

from sklearn.base import BaseEstimator
from sklearn.pipeline import FeatureUnion

from distill.featurizers.embedding import LEGACY_BACKEND, MiniLMFeaturizer, check_backend
from distill.featurizers.hashing import HashingFeaturizer
from distill.featurizers.lexicon import LexiconFeaturizer
from distill.featurizers.openai_api import OpenAIFeaturizer
from distill.featurizers.shape import ShapeFeaturizer
from monitor.contracts.errors import ConfigError

FEATURIZERS: dict[str, type[BaseEstimator]] = {
    "hashing": HashingFeaturizer,
    "lexicon": LexiconFeaturizer,
    "minilm": MiniLMFeaturizer,
    "openai": OpenAIFeaturizer,
    "shape": ShapeFeaturizer,
}
_NOT_CONFIG = {"client"}  # runtime objects, injected rather than serialised
_LOCAL = {"minilm": {"cache_dir"}}  # where this machine keeps files: injected, never in an artifact


def _part(name: str, params: dict[str, Any], openai_client: Any, model_cache_dir: str | None = None
          ) -> BaseEstimator:
    if name not in FEATURIZERS:
        raise ConfigError(f"unknown featurizer {name!r}; choose from {sorted(FEATURIZERS)} or join them with '+'")
    cls = FEATURIZERS[name]
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    if name == "openai" and openai_client is not None:
        kwargs["client"] = openai_client
    if name == "minilm":
        check_backend(kwargs.get("backend", MiniLMFeaturizer().backend))
        if model_cache_dir is not None:
            kwargs["cache_dir"] = str(model_cache_dir)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"bad parameters for featurizer {name!r}: {exc}") from exc


def make_featurizer(spec: str, *, openai_client: Any = None, embedding_backend: str | None = None,
                    model_cache_dir: str | None = None, **params: Any) -> BaseEstimator:
    """Build a featurizer from a spec like ``"hashing+minilm"``; ``params`` go to a single featurizer.

    ``embedding_backend`` (Settings.embedding_backend) and ``model_cache_dir`` apply to a ``minilm`` part."""
    names = [n.strip() for n in spec.split("+") if n.strip()]
    if not names:
        raise ConfigError(f"empty featurizer spec {spec!r}")
    if len(set(names)) != len(names):
        raise ConfigError(f"featurizer spec {spec!r} names a featurizer twice")
    if len(names) > 1 and params:
        raise ConfigError("keyword parameters apply to a single featurizer; use featurizer_from_config for unions")

    def part(name: str) -> BaseEstimator:
        kwargs = dict(params)
        if name == "minilm" and embedding_backend is not None:
            kwargs.setdefault("backend", embedding_backend)
        return _part(name, kwargs, openai_client, model_cache_dir)

    if len(names) == 1:
        return part(names[0])
    return FeatureUnion([(n, part(n)) for n in names])


def featurizer_name(featurizer: BaseEstimator) -> str:
    """``hashing``, ``minilm+hashing``, ...: the ``judge`` label of distilled score records."""
    if isinstance(featurizer, FeatureUnion):
        return "+".join(name for name, _ in featurizer.transformer_list)
    return str(featurizer.name)


def featurizer_config(featurizer: BaseEstimator) -> dict[str, Any]:
    """JSON-serialisable description: ``{"name": ..., "parts": [{"name", "params"}, ...]}``."""
    parts = featurizer.transformer_list if isinstance(featurizer, FeatureUnion) else [(None, featurizer)]
    out = []
    for _, part in parts:
        params = {k: list(v) if isinstance(v, tuple) else v for k, v in part.get_params(deep=False).items()}
        skip = _NOT_CONFIG | _LOCAL.get(part.name, set())
        out.append({"name": part.name, "params": {k: v for k, v in params.items() if k not in skip}})
    return {"name": featurizer_name(featurizer), "parts": out}


def featurizer_from_config(config: dict[str, Any], *, openai_client: Any = None,
                           model_cache_dir: str | None = None) -> BaseEstimator:
    """Rebuild what :func:`featurizer_config` described; raises ConfigError on unknown names.

    A ``minilm`` part without a recorded backend predates the ONNX backend: it was trained with torch."""
    try:
        parts = [(p["name"], _part(p["name"], _params(p), openai_client, model_cache_dir)) for p in config["parts"]]
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"malformed featurizer config {config!r}: {exc}") from exc
    return parts[0][1] if len(parts) == 1 else FeatureUnion(parts)


def _params(part: dict[str, Any]) -> dict[str, Any]:
    params = dict(part.get("params", {}))
    if part["name"] == "minilm":
        params.setdefault("backend", LEGACY_BACKEND)
    return params


def embedding_backend_of(config: dict[str, Any]) -> str | None:
    """The MiniLM backend a featurizer config records (legacy: torch), or None when it has no MiniLM part."""
    for part in config.get("parts", []):
        if isinstance(part, dict) and part.get("name") == "minilm":
            return str(_params(part)["backend"])
    return None
