"""Featurizers with the scikit-learn transformer API: ``transform(list[Conversation]) -> matrix``.

Named by a spec string (Settings.featurizer): ``hashing``, ``minilm``, ``openai``, ``shape`` (the
conversation's length, only useful beside a text featurizer) or a concatenation such as
``hashing+minilm`` or ``hashing+shape`` (a :class:`~sklearn.pipeline.FeatureUnion`). A model
artifact stores :func:`featurizer_config` (names and JSON parameters, never objects) and workers
rebuild the same featurizer with :func:`featurizer_from_config`.
"""

from __future__ import annotations

from typing import Any

from sklearn.base import BaseEstimator
from sklearn.pipeline import FeatureUnion

from distill.featurizers.embedding import MiniLMFeaturizer
from distill.featurizers.hashing import HashingFeaturizer
from distill.featurizers.openai_api import OpenAIFeaturizer
from distill.featurizers.shape import ShapeFeaturizer
from monitor.contracts.errors import ConfigError

FEATURIZERS: dict[str, type[BaseEstimator]] = {
    "hashing": HashingFeaturizer,
    "minilm": MiniLMFeaturizer,
    "openai": OpenAIFeaturizer,
    "shape": ShapeFeaturizer,
}
_NOT_CONFIG = {"client"}  # runtime objects, injected rather than serialised



def _part(name: str, params: dict[str, Any], openai_client: Any) -> BaseEstimator:
    if name not in FEATURIZERS:
        raise ConfigError(f"unknown featurizer {name!r}; choose from {sorted(FEATURIZERS)} or join them with '+'")
    cls = FEATURIZERS[name]
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    if name == "openai" and openai_client is not None:
        kwargs["client"] = openai_client
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"bad parameters for featurizer {name!r}: {exc}") from exc


def make_featurizer(spec: str, *, openai_client: Any = None, **params: Any) -> BaseEstimator:
    """Build a featurizer from a spec like ``"hashing+minilm"``; ``params`` go to a single featurizer."""
    names = [n.strip() for n in spec.split("+") if n.strip()]
    if not names:
        raise ConfigError(f"empty featurizer spec {spec!r}")
    if len(set(names)) != len(names):
        raise ConfigError(f"featurizer spec {spec!r} names a featurizer twice")
    if len(names) == 1:
        return _part(names[0], params, openai_client)
    if params:
        raise ConfigError("keyword parameters apply to a single featurizer; use featurizer_from_config for unions")
    return FeatureUnion([(n, _part(n, {}, openai_client)) for n in names])


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
        out.append({"name": part.name, "params": {k: v for k, v in params.items() if k not in _NOT_CONFIG}})
    return {"name": featurizer_name(featurizer), "parts": out}


def featurizer_from_config(config: dict[str, Any], *, openai_client: Any = None) -> BaseEstimator:
    """Rebuild what :func:`featurizer_config` described; raises ConfigError on unknown names."""
    try:
        parts = [(p["name"], _part(p["name"], dict(p.get("params", {})), openai_client)) for p in config["parts"]]
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"malformed featurizer config {config!r}: {exc}") from exc
    return parts[0][1] if len(parts) == 1 else FeatureUnion(parts)
