"""Distilled scoring: per-rubric classifiers from the model registry, hot-swapped while running.

The faust classify agent is wiring around :class:`DistilledScorer`: it calls :meth:`score_batch`
on a batch of finished conversations and gets one ``distilled`` score record per conversation
(or None while no live model exists, which the agent counts as unscored). Every
``poll_s`` seconds the scorer reads the registry's ``LIVE`` pointer (one small file); when it
names a new version, the artifact is loaded and swapped in with one reference assignment.
A batch takes its model reference once, so it is scored by exactly one version, and the version
travels in every record (``model_version``). Models for another rubric set are refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from distill.live_model import LiveModel
from distill.registry import ModelRegistry
from distill.serving import KIND, LoadedModel, load_live
from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.scores import ScoreRecord, trusted_item, trusted_record

log = logging.getLogger(__name__)
class DistilledScorer:
    """Score conversations with the live distilled model; poll the registry and hot-swap it."""

    def __init__(
        self, registry: ModelRegistry, rubric: RubricSet, *, poll_s: float = 10.0, kind: str = KIND,
        openai_client: Any = None, clock: Callable[[], float] = time.monotonic,
        embedding_backend: str | None = None, model_cache_dir: str | None = None,
    ) -> None:
        self.registry = registry
        self.rubric = rubric
        self.kind = kind
        self._polarity = {item.id: item.polarity for item in rubric.items}
        self._live = LiveModel(registry, kind, lambda version: load_live(
            registry, rubric, version, kind=kind, openai_client=openai_client, embedding_backend=embedding_backend,
            model_cache_dir=model_cache_dir), poll_s=poll_s, clock=clock)

    @property
    def model_version(self) -> str | None:
        return self._live.version

    @property
    def live(self) -> LoadedModel | None:
        live = self._live.live
        return live[1] if live else None

    def maybe_reload(self, *, force: bool = False) -> bool:
        """Swap in the registry's live version if it changed; True when a new model was loaded.

        At most one registry read per ``poll_s`` (unless ``force``). An unusable version (other
        rubric set, corrupt artifact) is logged and refused; the current model keeps serving.
        """
        return self._live.maybe_reload(force=force)

    def score_batch(
        self, conversations: Sequence[Conversation], *, shadow_flags: Sequence[bool] | None = None,
        sample_weights: Sequence[float] | None = None,
    ) -> list[ScoreRecord] | None:
        """One record per conversation (same order), or None while no live model exists.

        Polls the registry first (cheap, see :meth:`maybe_reload`); then one featurizer
        ``transform`` and one matrix product score every item of every conversation.
        """
        self.maybe_reload()
        live = self.live
        if live is None:
            return None
        if not conversations:
            return []
        if shadow_flags is not None and len(shadow_flags) != len(conversations):
            raise ValueError(f"shadow_flags has {len(shadow_flags)} entries for {len(conversations)} conversations")
        started = time.perf_counter()
        proba = live.model.predict_proba(live.featurizer.transform(list(conversations)))
        latency = (time.perf_counter() - started) / len(conversations)
        # the bounds ScoreRecord would check per item, checked once for the batch (records are built unvalidated)
        if proba.size and not (np.isfinite(proba).all() and proba.min() >= 0.0 and proba.max() <= 1.0):
            raise ValueError("the live model produced probabilities outside [0, 1]")
        if sample_weights is not None and not all(w > 0 for w in sample_weights):
            raise ValueError("sample weights must be > 0")
        polarity = [self._polarity[item_id] for item_id in live.model.item_ids]
        verdicts = proba >= np.asarray(live.model.thresholds)
        sign = np.array([{"sat": 1.0, "dsat": -1.0}.get(pol, 0.0) for pol in polarity])
        r_values = (proba @ sign).tolist()  # SPUR's R over probabilities, as scores.aggregate_r
        common = {"scorer": "distilled", "judge": live.judge, "rubric_set": self.rubric.id,
                  "rubric_version": self.rubric.version, "model_version": live.version, "latency_s": latency}
        records = []
        for row, conversation in enumerate(conversations):
            p, v = proba[row].tolist(), verdicts[row].tolist()
            items = [trusted_item(item_id, polarity[j], p[j], v[j]) for j, item_id in enumerate(live.model.item_ids)]
            feedback = conversation.feedback.model_dump(exclude_none=True) if conversation.feedback else None
            span, response_id = conversation.judged_span()
            # no validation: every value is typed here (floats and bools from tolist, a validated conversation's
            # fields); its copies of the conversation's dicts keep the record apart from the session state
            records.append(trusted_record({
                **common, "conversation_id": conversation.conversation_id, "R": r_values[row],
                "shadow": bool(shadow_flags[row]) if shadow_flags else False,
                "sample_weight": float(sample_weights[row]) if sample_weights else 1.0,
                "metadata": dict(conversation.metadata), "feedback": feedback or None,
                "ended_at": None if conversation.ended_at is None else float(conversation.ended_at),
                "span": span, "response_id": response_id, "incomplete": conversation.incomplete is not None,
            }, items))
        return records
