"""Verdicts out as OpenTelemetry ``gen_ai.evaluation.result`` log events (``otel_evaluation_events``).

One event per rubric item of every counted score record (the exporter calls :meth:`observe` once
per (scorer, conversation)), and one per rubric item with ``error.type`` when the judge gave no score
(:meth:`failed`). Each is parented to the judged call's span when the input carried it (OTLP input);
without a span it carries ``gen_ai.response.id`` when known, and always ``gen_ai.conversation.id``: by default the
conversation's keyed reference (``ref-<hex>``, ``otel_evaluation_conversation_id``), never the raw id, which is
often an e-mail address and would leave the process in an export.

One scale per evaluation name: ``gen_ai.evaluation.score.value`` is P(yes) in 0-1 for every scorer (the
distilled probability, the judge's own when its mode gives one (logprobs), else its verdict as 1 or 0),
the judge's raw SPUR/Likert score travels in ``convmon.spur_score``. The label says which way is bad
(:func:`label`), whatever the item's polarity. Provenance follows open-telemetry/semantic-conventions-genai
PR #359 (``gen_ai.evaluation.evaluator.*``, still a proposal) and ``convmon.*`` where it has no name; a judge
record's evaluator (model as the endpoint reported it, endpoint, prompt hash, rubric, mode, convmon version)
goes out under the same prefix (:func:`evaluator_attributes`, provisional names).
Delivery (protocol, queue, counters, resources) is :mod:`monitor.stages.otel_export`'s. This module
imports the SDK: it is imported only when the setting is on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from monitor.contracts.evaluator import Evaluator
from monitor.contracts.events import Conversation
from monitor.contracts.metrics_otel import OtelMetrics
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.scores import ItemResult, ScoreRecord, verdict_label
from monitor.stages.otel_export import CountedProcessor, Loggers, otlp_exporter

EVENT = "gen_ai.evaluation.result"
AttributeValue = str | float | bool
Attributes = dict[str, AttributeValue]
Redact = Callable[[str], str]


def parent(span: str | None) -> Context | None:
    """The judged call's span as a remote parent context, from the ``<trace>-<span>`` hex the turn carried."""
    if not span:
        return None
    trace_hex, _, span_hex = span.partition("-")
    ctx = SpanContext(int(trace_hex, 16), int(span_hex, 16), is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return set_span_in_context(NonRecordingSpan(ctx))


def score_value(item: ItemResult) -> float | None:
    """P(yes) in 0-1: the item's probability (distilled, or the judge's logprobs), else the verdict as 1/0;
    None when there is no verdict (uncertain, not applicable): no score rather than a made-up one."""
    if item.probability is not None:
        return float(item.probability)
    if item.uncertain or item.verdict is None:
        return None
    return 1.0 if item.verdict else 0.0


def label(scorer: str, item: ItemResult) -> str:
    """``bad``, ``good`` or ``neutral`` by polarity, so a backend colours the events right: a yes on a DSAT item
    is bad, on a SAT item good; a no on either is neutral (the signal is absent); a maxim kept is good, broken
    bad. ``uncertain`` when the jury split or the model is unsure, ``not_applicable`` for a maxim that is not."""
    verdict = verdict_label(scorer, item)
    if verdict == "uncertain":
        return "not_applicable" if item.polarity == "maxim" and not item.uncertain and item.probability is None \
            else "uncertain"
    yes = verdict == "yes"
    if item.polarity == "dsat":
        return "bad" if yes else "neutral"
    if item.polarity == "sat":
        return "good" if yes else "neutral"
    return "good" if yes else "bad"


EVALUATOR = "gen_ai.evaluation.evaluator."  # semconv-genai PR #359's prefix; the names below it are provisional


def evaluator_attributes(evaluator: Evaluator | None) -> Attributes:
    """The judge's provenance (:class:`monitor.contracts.evaluator.Evaluator`) as
    ``gen_ai.evaluation.evaluator.{model,endpoint,prompt.hash,rubric,mode,convmon_version}``; provisional names
    until the conventions settle them (docs/otel.md)."""
    if evaluator is None:
        return {}
    return {f"{EVALUATOR}model": evaluator.model, f"{EVALUATOR}endpoint": evaluator.endpoint,
            f"{EVALUATOR}prompt.hash": evaluator.prompt, f"{EVALUATOR}rubric": evaluator.rubric,
            f"{EVALUATOR}mode": evaluator.mode, f"{EVALUATOR}convmon_version": evaluator.version}


def provenance(scorer: str, judge: str, model_version: str, rubric: str) -> Attributes:
    """Who evaluated, in semantic-conventions-genai PR #359's names where it has them: ``evaluator.id``
    (``convmon.llm`` or ``convmon.distilled``), ``evaluator.version`` (the judge's model(s), or the distilled
    model's version) and ``evaluator.type`` (``llm_judge`` for the LLM judge; the simulated stand-in is
    ``deterministic``; PR #359 has no value for a trained classifier, so distilled records leave it out)."""
    out: Attributes = {"gen_ai.evaluation.evaluator.id": f"convmon.{scorer}",
                       "gen_ai.evaluation.evaluator.version": model_version,
                       "convmon.scorer": scorer, "convmon.judge": judge, "convmon.rubric_set": rubric}
    if scorer == "llm":
        out["gen_ai.evaluation.evaluator.type"] = "deterministic" if judge == "simulated" else "llm_judge"
    return out


def service_of(metadata: Mapping[str, str], dimension: str | None) -> str | None:
    return metadata.get(dimension) if dimension else None


class EvaluationEvents:
    """Builds the events; ``loggers`` (one per judged app) send them."""

    def __init__(self, loggers: Loggers, *, scorers: Sequence[str], redact: Redact, rubric: RubricSet | None = None,
                 judge: str = "", judge_version: str = "", service_dimension: str | None = None,
                 conversation_ref: Redact | None = None) -> None:
        self.loggers = loggers
        self.conversation_ref = conversation_ref or (lambda conversation_id: conversation_id)  # None: the raw id
        self.scorers = frozenset(scorers)
        self.redact = redact
        self.rubric = rubric
        self.judge, self.judge_version = judge, judge_version  # for failure events: no record names them
        self.service_dimension = service_dimension

    @classmethod
    def from_environment(cls, *, scorers: Sequence[str], redact: Redact, metrics: OtelMetrics, queue_size: int,
                         exporter: LogRecordExporter | None = None, rubric: RubricSet | None = None,
                         service_dimension: str | None = None,
                         conversation_ref: Redact | None = None) -> EvaluationEvents:
        """The OTLP exporter, queue and resource the ``OTEL_*`` variables and settings ask for."""
        resource = Resource.create({"service.name": "convmon"}).merge(OTELResourceDetector().detect())
        processor = CountedProcessor(exporter if exporter is not None else otlp_exporter(), metrics,
                                     max_queue_size=queue_size)
        return cls(Loggers(resource, processor), scorers=scorers, redact=redact, rubric=rubric,
                   service_dimension=service_dimension, conversation_ref=conversation_ref)

    def observe(self, record: ScoreRecord) -> None:
        if record.scorer not in self.scorers:
            return
        common: Attributes = {"gen_ai.conversation.id": self.conversation_ref(record.conversation_id),
                              **provenance(record.scorer, record.judge, record.model_version,
                                           f"{record.rubric_set}@{record.rubric_version}"),
                              **evaluator_attributes(record.evaluator)}
        if record.response_id:
            common["gen_ai.response.id"] = record.response_id
        if record.incomplete:  # scored from the turns that remain: a turn was rejected
            common["convmon.conversation.incomplete"] = True
        events: list[Attributes] = []
        for item in record.items:
            attributes: Attributes = {**common, "gen_ai.evaluation.name": item.item_id,
                                      "gen_ai.evaluation.score.label": label(record.scorer, item),
                                      "convmon.verdict": verdict_label(record.scorer, item),
                                      "convmon.polarity": item.polarity,
                                      "convmon.score.bad_when": "high" if item.polarity == "dsat" else "low"}
            value = score_value(item)
            if value is not None:
                attributes["gen_ai.evaluation.score.value"] = value
            if item.score is not None:
                attributes["convmon.spur_score"] = float(item.score)
            if item.explanation:  # judges quote user text: never out unredacted
                attributes["gen_ai.evaluation.explanation"] = self.redact(item.explanation)
            events.append(attributes)
        if record.satisfaction is not None:  # the calibrated P(satisfied) of the whole conversation
            events.append({**common, "gen_ai.evaluation.name": "convmon.satisfaction",
                           "gen_ai.evaluation.score.value": float(record.satisfaction),
                           "convmon.score.bad_when": "low"})
        self._emit(events, record.span, record.scored_at, service_of(record.metadata, self.service_dimension))

    def failed(self, conversation: Conversation, reason: str) -> None:
        """The judge gave no score for ``conversation`` (``reason``: the dead letter's, low-cardinality): one
        event per rubric item with ``error.type``, as the conventions ask of an evaluation that ended in error."""
        if "llm" not in self.scorers or self.rubric is None:
            return
        span, response_id = conversation.judged_span()
        common: Attributes = {"gen_ai.conversation.id": self.conversation_ref(conversation.conversation_id),
                              "error.type": reason,
                              **provenance("llm", self.judge, self.judge_version, self.rubric.key)}
        if response_id:
            common["gen_ai.response.id"] = response_id
        events: list[Attributes] = [{**common, "gen_ai.evaluation.name": item.id,
                                     "convmon.polarity": item.polarity} for item in self.rubric.items]
        self._emit(events, span, time.time(), service_of(conversation.metadata, self.service_dimension))

    def _emit(self, events: list[Attributes], span: str | None, at: float, service: str | None) -> None:
        logger = self.loggers.get(service)
        context, timestamp = parent(span), int(at * 1e9)
        for attributes in events:
            logger.emit(timestamp=timestamp, context=context, event_name=EVENT, attributes=attributes)

    def shutdown(self) -> None:
        self.loggers.shutdown()
