"""Load one registry version of the distilled models as a ready scorer (model + featurizer).

Shared by the monitor's classify stage and by retraining, which compares a candidate with the live
version on the same test set.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distill.featurizers.spec import embedding_backend_of, featurizer_from_config
from distill.model import RubricModel
from distill.registry import ModelRegistry
from monitor.contracts.errors import ModelError
from monitor.contracts.rubric_set import RubricSet

KIND = "distilled"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedModel:
    version: str
    model: RubricModel
    featurizer: Any
    judge: str  # the featurizer name, the ``judge`` field of distilled records
    trained_at: float | None
    # the drift reference (item -> out-of-fold probabilities on the training hash slice) and the mean uncertainty
    # per measure there (the router's normaliser); empty for models trained before they were stored
    reference: dict[str, np.ndarray] = field(default_factory=dict)
    mean_uncertainty: dict[str, float] = field(default_factory=dict)


def load_live(registry: ModelRegistry, rubric: RubricSet, version: str, *, kind: str = KIND,
              openai_client: Any = None, embedding_backend: str | None = None,
              model_cache_dir: str | None = None) -> LoadedModel:
    """Load one registry version as a ready scorer; ModelError if it is unusable for ``rubric``.

    MiniLM runs with the backend the model was trained with, whatever ``embedding_backend`` (the
    setting) says: serving int8 embeddings to a model fitted on fp32 ones (or the reverse) is a skew.
    A difference is logged; the next retraining round trains with the setting's backend."""
    arrays, manifest = registry.load(kind, version)
    model = RubricModel.from_arrays(arrays, manifest)
    if model.rubric_key != rubric.key:
        raise ModelError(
            f"model {kind}/{version} was trained for rubric set {model.rubric_key!r}, but this worker runs "
            f"{rubric.key!r}; retrain for {rubric.key!r} or run the matching rubric set"
        )
    unknown = [i for i in model.item_ids if i not in rubric.item_ids]
    if unknown:
        raise ModelError(f"model {kind}/{version} scores items not in {rubric.key!r}: {unknown}")
    featurizer = featurizer_from_config(model.featurizer, openai_client=openai_client, model_cache_dir=model_cache_dir)
    trained_with = embedding_backend_of(model.featurizer)
    if embedding_backend is not None and trained_with is not None and trained_with != embedding_backend:
        log.warning("model %s/%s was trained with MiniLM backend %r; it is served with %r, not with "
                    "CONVMON_EMBEDDING_BACKEND=%r, until a model trained with that backend is promoted",
                    kind, version, trained_with, trained_with, embedding_backend)
    means = (manifest.get("reference") or {}).get("mean_uncertainty") or {}
    return LoadedModel(version=version, model=model, featurizer=featurizer, judge=str(model.featurizer["name"]),
                       trained_at=manifest.get("created_at"), reference=model.reference,
                       mean_uncertainty={k: float(v) for k, v in means.items() if v is not None})
