"""Calibration data from the label store: the judge's rubric verdicts in, the user's feedback as target.

LLM-Rubric's questions become the rubric items plus one target, ``satisfied``:

- every rubric item is a 2-option question whose judge distribution is ``[P(no), P(yes)]``: the
  item's ``probability`` when the judge gave one (logprobs mode), else the verdict as 1/0, and
  0.5 when the judge was uncertain (a split jury) or said nothing, the same rule as the exported
  expected rates (``monitor.stages.export.item_probability``);
- ``satisfied`` is a 2-option question (1 = not satisfied, 2 = satisfied) that the judge is never
  asked (a zero row), answered by the user's feedback: thumbs up/down, and CSAT 1-5 with >= 4
  satisfied and <= 2 not; a 3 is not applicable by default (``csat_neutral``), since a neutral
  answer says neither;
- the label source (LLM-Rubric's "judge", which gets its own weight offsets) is the feedback
  channel, ``thumbs`` or ``csat``, optionally joined with a tenant from the conversation's
  metadata (``thumbs:acme``), because channels and tenants differ in base rate, not only in what
  the rubric says. A conversation with both a thumbs vote and a CSAT answer gives two label rows.

The monitor maps a live judge score through :func:`judge_distributions` with the model's
question order, so serving and training read the judge the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from distill.calibration.data import CalibrationDataError, CalibrationSet, from_records
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.scores import ItemResult

__all__ = [
    "NOT_SATISFIED",
    "SATISFIED",
    "TARGET",
    "FeedbackMapping",
    "calibration_questions",
    "calibration_set_from_labels",
    "item_distribution",
    "judge_distributions",
    "manifest_problem",
    "most_common_judge",
]

TARGET = "satisfied"
NOT_SATISFIED, SATISFIED = 1, 2  # answers of the target question
CsatNeutral = Literal["na", "satisfied", "unsatisfied"]


def item_distribution(item: ItemResult) -> list[float]:
    """``[P(no), P(yes)]`` for one judge item.

    >>> item_distribution(ItemResult(item_id="sat.praise", polarity="sat", verdict=True))
    [0.0, 1.0]
    >>> item_distribution(ItemResult(item_id="sat.praise", polarity="sat", uncertain=True))
    [0.5, 0.5]
    """
    if item.probability is not None:
        p = item.probability
    elif item.uncertain or item.verdict is None:
        p = 0.5
    else:
        p = 1.0 if item.verdict else 0.0
    return [1.0 - p, p]


def judge_distributions(items: Iterable[ItemResult], questions: Sequence[str]) -> dict[str, list[float]]:
    """The judge's distribution per question; items outside ``questions`` are ignored, and a question
    without an item (the target, or an item the judge skipped) stays out: a zero row, "not asked"."""
    wanted = set(questions)
    return {item.item_id: item_distribution(item) for item in items if item.item_id in wanted}


def calibration_questions(rubric: RubricSet) -> list[str]:
    """Question order of a model trained for ``rubric``: its items in rubric order, then the target."""
    return [*rubric.item_ids, TARGET]


@dataclass(frozen=True)
class FeedbackMapping:
    """How feedback becomes target labels and label sources (saved in the model's manifest).

    >>> FeedbackMapping(tenant_key="app").labels("up", 3, {"app": "web"})
    [('thumbs:web', 2)]
    >>> FeedbackMapping(csat_neutral="unsatisfied").labels(None, 3, {})
    [('csat', 1)]
    """

    csat_neutral: CsatNeutral = "na"
    tenant_key: str | None = None

    def __post_init__(self) -> None:
        if self.csat_neutral not in ("na", "satisfied", "unsatisfied"):
            raise CalibrationDataError("The 'csat_neutral' parameter of FeedbackMapping must be one of 'na', "
                                       f"'satisfied', 'unsatisfied'. Got {self.csat_neutral!r} instead.")

    def source(self, channel: str, metadata: Mapping[str, str]) -> str:
        """``channel``, or ``channel:tenant`` when a tenant key is set and the conversation has one."""
        tenant = metadata.get(self.tenant_key, "") if self.tenant_key else ""
        return f"{channel}:{tenant}" if tenant else channel

    def csat_answer(self, csat: int) -> int | None:
        if csat >= 4:
            return SATISFIED
        if csat <= 2:
            return NOT_SATISFIED
        return {"satisfied": SATISFIED, "unsatisfied": NOT_SATISFIED}.get(self.csat_neutral)

    def labels(self, thumbs: str | None, csat: int | None, metadata: Mapping[str, str]) -> list[tuple[str, int]]:
        """``(label source, 1 or 2)`` for every feedback channel the conversation answered."""
        out = []
        if thumbs in ("up", "down"):
            out.append((self.source("thumbs", metadata), SATISFIED if thumbs == "up" else NOT_SATISFIED))
        if csat is not None and (answer := self.csat_answer(csat)) is not None:
            out.append((self.source("csat", metadata), answer))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"csat_neutral": self.csat_neutral, "tenant_key": self.tenant_key}


def most_common_judge(records: Iterable[Any]) -> str:
    """The LLM judge with the most labels (ties: first by name); a model calibrates one judge."""
    counts = Counter(r.judge for r in records)
    if not counts:
        raise CalibrationDataError("no labelled conversations to calibrate on")
    return str(min(counts, key=lambda j: (-counts[j], j)))


def calibration_set_from_labels(records: Iterable[Any], rubric: RubricSet, *, llm_judge: str,
                                mapping: FeedbackMapping | None = None) -> CalibrationSet:
    """Judge verdicts and feedback of label-store records (``distill.label_record.LabelRecord``) as a set.

    Only records of ``rubric`` (id and version) scored by ``llm_judge`` count, and only those with
    usable feedback give label rows; what was left out is counted in ``notes``.
    """
    mapping = mapping or FeedbackMapping()
    questions = calibration_questions(rubric)
    notes = {"records": 0, "other_rubric": 0, "other_llm_judge": 0, "no_feedback": 0, "label_rows": 0}
    evaluations: dict[str, dict[str, list[float]]] = {}
    labels: list[tuple[str, str, dict[str, int]]] = []
    for record in records:
        notes["records"] += 1
        if (record.rubric_set, record.rubric_version) != (rubric.id, rubric.version):
            notes["other_rubric"] += 1
            continue
        if record.judge != llm_judge:
            notes["other_llm_judge"] += 1
            continue
        rows = mapping.labels(record.thumbs, record.csat, record.metadata)
        if not rows:
            notes["no_feedback"] += 1
            continue
        evaluations[record.conversation_id] = judge_distributions(record.items, questions)
        labels += [(record.conversation_id, source, {TARGET: answer}) for source, answer in rows]
    notes["label_rows"] = len(labels)
    if not labels:
        raise CalibrationDataError(f"no conversation of {rubric.key} judged by {llm_judge!r} has usable "
                                   f"feedback (thumbs, CSAT): {notes}")
    data = from_records(evaluations, labels, questions=questions, n_options=[2] * len(questions), target=TARGET)
    return replace(data, notes=notes)


def manifest_problem(manifest: Mapping[str, Any], rubric: RubricSet) -> str | None:
    """Why a ``calibration`` artifact cannot serve ``rubric`` (None when it can).

    Its inputs are ``rubric``'s items in a fixed order: a model trained for another rubric set or
    version would read every verdict in the wrong place, so it is refused, never guessed at.
    """
    key = manifest.get("rubric_key")
    if key is None:
        return ("it has no rubric set in its manifest (trained from TSV files?); train one for this worker "
                f"with `convmon calibrate train --label-store URL --rubric-set {rubric.id}`")
    if key != rubric.key:
        return f"it was trained for rubric set {key!r}, but this worker runs {rubric.key!r}"
    if list(manifest.get("questions", [])) != calibration_questions(rubric):
        return f"its questions {manifest.get('questions')} are not the items of {rubric.key!r} plus {TARGET!r}"
    if manifest.get("target") != TARGET:
        return f"its target is {manifest.get('target')!r}, not {TARGET!r}"
    return None
