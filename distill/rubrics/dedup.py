"""Semantic de-duplication of rubric items: cosine similarity of their embedded text.

Items are embedded with the distillation featurizers (``hashing``, ``minilm`` or ``openai``) by
posing each ``"name: description"`` as a one-turn conversation, so the featurizers' public
``transform`` is all that is used (for the embedding featurizers the user block of a one-turn
conversation is the text's own embedding, so cosines are unchanged). Greedy, in order: an item
is dropped when its cosine with an item already kept, of the same polarity, reaches ``threshold``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator

from distill.featurizers.hashing import HashingFeaturizer
from distill.featurizers.spec import make_featurizer
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.rubric_set import RubricItem


def make_embedder(spec: str, *, openai_client: Any = None) -> BaseEstimator:
    """``hashing`` (a small, offline variant), ``minilm`` or ``openai`` (needs ``openai_client``)."""
    if spec == "hashing":
        return HashingFeaturizer(n_word_features=2**12, n_char_features=2**12, n_context_features=8)
    if spec == "openai" and openai_client is None:
        raise ConfigError("the 'openai' de-duplication embedder needs a configured endpoint (OPENAI_BASE_URL)")
    return make_featurizer(spec, openai_client=openai_client)


def item_text(item: RubricItem) -> str:
    return f"{item.name}: {item.description}"


def embed_items(items: list[RubricItem], embedder: BaseEstimator) -> np.ndarray:
    """Unit-norm rows, one per item."""
    conversations = [
        Conversation(conversation_id=f"item-{i}", turns=[Turn(index=0, role="user", text=item_text(item))])
        for i, item in enumerate(items)
    ]
    matrix = embedder.transform(conversations)
    dense = matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    unit: np.ndarray = dense / np.maximum(norms, 1e-12)
    return unit


@dataclass(frozen=True)
class Duplicate:
    dropped: str
    kept: str
    cosine: float


def deduplicate(
    items: list[RubricItem], embedder: BaseEstimator, *, threshold: float = 0.85, keep: list[RubricItem] | None = None
) -> tuple[list[RubricItem], list[Duplicate]]:
    """Items (in order) minus near-duplicates of earlier ones or of ``keep`` (already accepted items)."""
    if not 0 < threshold <= 1:
        raise ConfigError(f"The 'threshold' parameter of deduplicate must be a float in (0, 1]. Got {threshold}.")
    keep = list(keep or [])
    if not items:
        return [], []
    vectors = embed_items(keep + items, embedder)
    kept_rows = list(range(len(keep)))
    out: list[RubricItem] = []
    dropped: list[Duplicate] = []
    everything = keep + items
    for row in range(len(keep), len(everything)):
        item = everything[row]
        same = [k for k in kept_rows if everything[k].polarity == item.polarity]
        if same:
            cosines = vectors[same] @ vectors[row]
            best = int(np.argmax(cosines))
            if cosines[best] >= threshold:
                dropped.append(Duplicate(item.id, everything[same[best]].id, round(float(cosines[best]), 4)))
                continue
        kept_rows.append(row)
        out.append(item)
    return out, dropped
