"""Calibrated P(satisfied) for judge-scored conversations, from the live ``calibration`` model.

The judge agent passes every ``llm`` score record through :class:`CalibrationScorer`. With a live
LLM-Rubric model trained for this worker's rubric set and judge (``convmon calibrate train
--label-store``, or the leader's retraining), the record's per-item verdicts become the network's
input and ``satisfaction`` = P(the label source would say "satisfied"). The exporter sums these
into ``convmon_satisfaction_probability_sum``: an expected count of satisfied conversations, not
an argmax count, so the share it gives stays calibrated when most conversations are borderline.

The model is hot-swapped like the distilled one (:class:`distill.live_model.LiveModel`); one that
was trained for another rubric set, or is corrupt, is refused and the current one keeps serving.
torch is imported only when a calibration model is first loaded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from distill.calibration.feedback import judge_distributions, manifest_problem
from distill.live_model import LiveModel
from distill.registry import ModelRegistry
from monitor.contracts.errors import ModelError
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.scores import ScoreRecord

KIND = "calibration"


@dataclass(frozen=True)
class LoadedCalibration:
    version: str
    model: Any  # distill.calibration.network.LLMRubricCalibrator
    questions: tuple[str, ...]
    satisfied_label: int  # answers >= this are "satisfied"
    llm_judge: str | None  # the judge whose answers it calibrates (None: any)
    label_sources: tuple[str, ...]
    trained_at: float | None


def load_calibration(registry: ModelRegistry, rubric: RubricSet, version: str, *, kind: str = KIND
                     ) -> LoadedCalibration:
    """Load one registry version for ``rubric``; ModelError if it cannot serve it.

    The manifest is checked before the arrays are read (and before torch is imported).
    """
    problem = manifest_problem(registry.manifest(kind, version), rubric)
    if problem:
        raise ModelError(f"calibration model {kind}/{version} cannot serve this worker: {problem}")
    from distill.calibration.network import LLMRubricCalibrator

    arrays, manifest = registry.load(kind, version)
    model = LLMRubricCalibrator.from_arrays(arrays, manifest)
    questions = tuple(manifest["questions"])
    if len(model.n_options_) != len(questions) or questions[model.target_] != manifest["target"]:
        raise ModelError(f"calibration model {kind}/{version}: its arrays do not match its question list")
    return LoadedCalibration(version=version, model=model, questions=questions,
                             satisfied_label=int(manifest.get("satisfied_label", 2)),
                             llm_judge=manifest.get("llm_judge"), label_sources=tuple(model.judges_.tolist()),
                             trained_at=manifest.get("created_at"))


class Calibration(NamedTuple):
    """P(satisfied), or None and the bounded reason it is missing (a metric label)."""

    satisfaction: float | None
    skipped: str | None = None


class CalibrationScorer:
    """Map judge score records to calibrated P(satisfied) with the registry's live calibration model.

    ``label_source`` picks whose satisfaction is predicted (a feedback channel such as ``thumbs``,
    ``csat``, ``thumbs:<tenant>``); None, or a source the model has not seen, uses the shared model.
    """

    def __init__(self, registry: ModelRegistry, rubric: RubricSet, *, label_source: str | None = None,
                 poll_s: float = 10.0, kind: str = KIND, clock: Callable[[], float] = time.monotonic) -> None:
        self.rubric = rubric
        self.label_source = label_source
        self._live = LiveModel(registry, kind, lambda version: load_calibration(registry, rubric, version, kind=kind),
                               poll_s=poll_s, clock=clock)

    @property
    def live(self) -> LoadedCalibration | None:
        live = self._live.live
        return live[1] if live else None

    @property
    def version(self) -> str | None:
        return self._live.version

    def maybe_reload(self, *, force: bool = False) -> bool:
        """Poll the registry (at most once per ``poll_s``); True when a new model went live."""
        return self._live.maybe_reload(force=force)

    def calibrate(self, score: ScoreRecord) -> Calibration:
        """P(satisfied) of one judge record; ``skipped`` says why there is none.

        Errors of a broken model propagate (the caller logs them and exports without satisfaction).
        """
        live = self.live
        if score.scorer != "llm":
            return Calibration(None, "not_judge")
        if live is None:
            return Calibration(None, "no_model")
        if (score.rubric_set, score.rubric_version) != (self.rubric.id, self.rubric.version):
            return Calibration(None, "other_rubric")
        if live.llm_judge is not None and score.judge != live.llm_judge:
            return Calibration(None, "other_judge")
        from distill.calibration.network import calibrated_satisfaction  # loaded with the model

        judges = [self.label_source] if self.label_source is not None else None
        evaluations = [judge_distributions(score.items, live.questions)]
        [p] = calibrated_satisfaction(live.model, live.questions, evaluations,
                                      judges=judges, threshold=live.satisfied_label)
        if not np.isfinite(p):
            raise ModelError(f"calibration model {live.version} returned a non-finite probability")
        return Calibration(min(1.0, max(0.0, float(p))))
