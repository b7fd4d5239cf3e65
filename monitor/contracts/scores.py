"""Output contract: one score record per (conversation, scorer), on the scores topic.

``llm`` records carry the judge's per-item verdicts and 0-10 scores; ``distilled`` records carry
per-item probabilities. ``R`` is SPUR's aggregate: sum of SAT scores minus sum of DSAT scores
(for distilled records, the same sum over probabilities: an expected count difference).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from monitor.contracts.evaluator import Evaluator
from monitor.contracts.events import Conversation, ResponseId, SpanRef
from monitor.contracts.rubric_set import Polarity, RubricSet
from monitor.contracts.trusted import new, set_dict, set_extra, set_fields, set_private, trusted

Scorer = Literal["llm", "distilled"]
SampledBy = Literal["hash", "uncertainty", "feedback"]


class ItemResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: str
    polarity: Polarity
    verdict: bool | None = None  # llm: yes/no; None when the jury disagreed (uncertain) or not applicable
    score: float | None = Field(default=None, ge=0, le=10)  # llm: 1-10 when yes, 0 when no
    probability: float | None = Field(default=None, ge=0, le=1)  # distilled (or logprobs) P(yes)
    uncertain: bool = False
    mass: float | None = Field(default=None, ge=0, le=1)  # logprobs: raw P(yes)+P(no) before normalising
    # llm: the judge's reason for the verdict, when its mode asks for one (may quote user text: redact on output;
    # not on the scores topic). SPUR mode asks for it with judge_explanations.
    explanation: str | None = Field(default=None, max_length=2000)


class ScoreRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["score"] = "score"
    conversation_id: str
    scorer: Scorer
    judge: str  # which teacher or model produced it: "simulated", "openai:gpt-4o-mini", "hashing"
    rubric_set: str
    rubric_version: str
    model_version: str
    items: list[ItemResult]
    R: float
    satisfaction: float | None = None  # calibrated P(satisfied) when a calibration model is live
    shadow: bool = False  # a distilled score of a judge-sampled conversation (for agreement)
    sample_weight: float = Field(default=1.0, gt=0)  # importance weight of the routing decision: 1 / pi
    # llm records routed since the sampler: the inclusion probability pi(x) the router used, after
    # budget throttling, and what put the conversation in the slice ("hash": its draw fell under the hash rate,
    # so it belongs to the uniform slice whatever the boost). None on distilled records and older judge records.
    inclusion_probability: float | None = Field(default=None, gt=0, le=1)
    sampled_by: SampledBy | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    feedback: dict[str, str | int] | None = None
    scored_at: float = Field(default_factory=time.time)
    ended_at: float | None = None  # when the conversation ended (event time): convmon_score_delay_seconds
    latency_s: float = 0.0
    tokens: dict[str, int] = Field(default_factory=dict)
    cost_usd: float = 0.0
    # The judged call, when the input said (OTLP input): the last assistant turn's span and response id.
    span: SpanRef | None = None
    response_id: ResponseId | None = None
    # A turn of the conversation was rejected: scored from the turns that remain (incomplete_conversations=score).
    incomplete: bool = False
    # llm records: which judge made the verdict (model as the endpoint reported it, endpoint, prompt hash, rubric,
    # mode, convmon version). None on distilled records and on judge records written before it existed.
    evaluator: Evaluator | None = None
    # Which scoring of the conversation this is: 1 when it first closed, one more each time the user came back and
    # it closed again (CONVMON_REOPEN_WINDOW_S). The latest revision counts; it retracts what the previous counted.
    revision: int = Field(default=1, ge=1)


def judge_record(conversation: Conversation, items: list[ItemResult], *, judge: str, rubric: RubricSet,
                 model_version: str, latency_s: float, **extra: Any) -> ScoreRecord:
    """An ``llm`` record: the conversation's id, dimensions and feedback travel with the items and their R."""
    span, response_id = conversation.judged_span()
    return ScoreRecord(
        conversation_id=conversation.conversation_id,
        scorer="llm",
        judge=judge,
        rubric_set=rubric.id,
        rubric_version=rubric.version,
        model_version=model_version,
        items=items,
        R=aggregate_r(items),
        metadata=conversation.metadata,
        feedback=conversation.feedback.model_dump(exclude_none=True) if conversation.feedback else None,
        latency_s=latency_s,
        ended_at=conversation.ended_at,
        span=span,
        response_id=response_id,
        incomplete=conversation.incomplete is not None,
        **extra,
    )


# Unvalidated construction (contracts/trusted.py): the items' fields-set is shared.
_ITEM_FIELDS, _RECORD_FIELDS = {"item_id", "polarity", "probability", "verdict"}, frozenset(ScoreRecord.model_fields)
_ORDER = tuple(ScoreRecord.model_fields)  # a record's __dict__ keeps field order (model_dump_json's order)
_DEFAULTS = {name: info.default for name, info in ScoreRecord.model_fields.items()
             if not info.is_required() and info.default_factory is None}


def trusted_item(item_id: str, polarity: Polarity, probability: float, verdict: bool) -> ItemResult:
    """A distilled item built without validation (see :func:`trusted_record`)."""
    item: ItemResult = new(ItemResult)  # trusted() inlined: 20 items a record
    set_dict(item, {"item_id": item_id, "polarity": polarity, "verdict": verdict, "score": None,
                    "probability": probability, "uncertain": False, "mass": None, "explanation": None})
    set_fields(item, _ITEM_FIELDS)
    set_extra(item, None)
    set_private(item, None)
    return item


def trusted_record(fields: dict[str, Any], items: list[ItemResult]) -> ScoreRecord:
    """A record built without validation, for values this worker's own code typed (the distilled scorer's floats
    and bools from numpy's ``tolist``, metadata and feedback of an already validated conversation): validation
    cost the scorer 17 µs a record of 20 items. Never for anything read from outside (the scores topic, a judge's
    answer). Defaults are filled, in field order, as :meth:`ScoreRecord.model_validate` fills them;
    tests/stages/test_trusted_record.py checks the record and its bytes on the scores topic equal the validated
    ones."""
    if not fields.keys() <= _RECORD_FIELDS:
        raise TypeError(f"not ScoreRecord fields: {sorted(fields.keys() - _RECORD_FIELDS)}")
    given = {**_DEFAULTS, "metadata": {}, "tokens": {}, **fields, "items": items}
    if "scored_at" not in given:
        given["scored_at"] = time.time()
    values = {name: given[name] for name in _ORDER}
    return trusted(ScoreRecord, values, {*fields, "items"})


def aggregate_r(items: list[ItemResult]) -> float:
    """SPUR's R = sum(SAT scores) - sum(DSAT scores); probabilities stand in for scores if no score."""
    total = 0.0
    for item in items:
        value = item.score if item.score is not None else (item.probability or 0.0)
        if item.polarity == "sat":
            total += value
        elif item.polarity == "dsat":
            total -= value
    return total


def check_complete(items: list[ItemResult], rubric: RubricSet) -> list[str]:
    """Problems with an item list: every rubric item answered exactly once, nothing extra."""
    expected = set(rubric.item_ids)
    seen: dict[str, int] = {}
    for item in items:
        seen[item.item_id] = seen.get(item.item_id, 0) + 1
    problems = [f"missing item {i}" for i in rubric.item_ids if i not in seen]
    problems += [f"item {i} answered {n} times" for i, n in seen.items() if n > 1]
    problems += [f"unknown item {i}" for i in seen if i not in expected]
    return problems

def verdict_label(scorer: str, item: ItemResult) -> str:
    """``yes``/``no``/``uncertain``: the judge's answer, or the distilled verdict at the item's threshold.

    Each distilled item carries its own F1-chosen threshold (set at training), already applied in
    ``item.verdict``; a record without one falls back to p >= 0.5.
    """
    if scorer == "distilled":
        if item.verdict is not None:
            return "yes" if item.verdict else "no"
        if item.probability is None:
            return "uncertain"
        return "yes" if item.probability >= 0.5 else "no"
    if item.uncertain or item.verdict is None:
        return "uncertain"
    return "yes" if item.verdict else "no"
