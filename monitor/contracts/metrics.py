"""Every Prometheus metric convmon exports, declared once, on a registry passed in.

Naming follows prometheus conventions: prefix ``convmon_``, base units (seconds, bytes, USD),
``_total`` on counters. Labels are bounded: rubric item ids, polarity, scorer, reason codes and
the configured metadata dimensions (capped, overflowing to ``other``), never conversation ids.
Each worker exports its own series; rates and sums across workers are PromQL's job.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from monitor.contracts.metrics_judge import JudgeMetrics
from monitor.contracts.metrics_models import ModelMetrics
from monitor.contracts.metrics_otel import OtelMetrics
from monitor.contracts.metrics_scores import ScoreMetrics
from monitor.contracts.metrics_stream import StreamMetrics
from monitor.contracts.rubric_set import RubricSet


@dataclass(frozen=True)
class PartitionFamily:
    """A per-partition running total (monitor/stages/totals.py), exported by the partition's owner."""

    name: str  # exported with ``_total``
    documentation: str
    labels: tuple[str, ...]  # after ``partition``


VERDICT_AT = 3  # ("rubric", "polarity", "scorer", "verdict", *dimensions)
ZERO_VERDICTS = ("yes", "no")


def verdict_siblings(labels: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The ``yes``/``no`` series beside a verdict series, created at zero with it.

    A counter series that is born at 1 hides that first count from ``increase()``. With dimensions, every
    new (item, dimension values) combination's first ``yes`` was such a count: on a new model version, or
    in any young window, the DSAT rate read low, most of all for rare items (the demo's judge slice read
    a 5 % rate as 0-2 % and its alert's baseline was empty; without dimensions :meth:`Metrics.init_rubric`
    already creates them)."""
    return [(*labels[:VERDICT_AT], v, *labels[VERDICT_AT + 1:]) for v in ZERO_VERDICTS if v != labels[VERDICT_AT]]


def agreement_siblings(labels: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The other (judge, distilled) pairs of an agreement series' item, exported at 0 with it (as
    :func:`verdict_siblings`)."""
    return [(labels[0], j, d) for j in ZERO_VERDICTS for d in ZERO_VERDICTS if (j, d) != labels[1:]]


def partition_families(dimensions: tuple[str, ...]) -> dict[str, PartitionFamily]:
    """Metrics attribute -> the per-partition total that mirrors it.

    The per-worker counters stay as they were; these are their partition-owned, crash-safe twins.
    Each multiplies its series by the partition count (``topic_partitions``)."""
    dims = tuple(dimensions)
    base = {
        "scored": PartitionFamily(
            "convmon_partition_conversations_scored",
            "Score records counted in an input partition, since the partition's first count (kept in the scored "
            "table's changelog; exported by the partition's current owner).",
            ("scorer", *dims)),
        "verdicts": PartitionFamily(
            "convmon_partition_rubric_verdicts",
            "Per-item verdicts counted in an input partition (as convmon_rubric_verdicts_total), exported by the "
            "partition's current owner.",
            ("rubric", "polarity", "scorer", "verdict", *dims)),
        "probability_sum": PartitionFamily(
            "convmon_partition_rubric_probability_sum",
            "Sum of per-item probabilities in an input partition (as convmon_rubric_probability_sum_total), "
            "exported by the partition's current owner.",
            ("rubric", "polarity", "scorer", *dims)),
        **residual_families(dims),
        "agreement_pairs": PartitionFamily(
            "convmon_partition_agreement_pairs",
            "Judged conversations per item by the judge's verdict and the distilled model's (p >= 0.5) on the same "
            "revision, in an input partition (as convmon_agreement_pairs_total, counted by each conversation's "
            "latest judged revision; exported by the partition's current owner).",
            ("rubric", "judge", "distilled")),
    }
    return {**base, **retraction_families(base)}


RETRACTED = "_retracted"  # suffix of a family's retraction twin (attribute and metric name)


def retraction_families(families: dict[str, PartitionFamily]) -> dict[str, PartitionFamily]:
    """Beside every per-partition total, what revisions of re-scored conversations took back from it: a
    conversation the user came back to is scored again, and its new revision retracts the previous one's counts.
    Counters only go up, so the recording rules subtract these (docs/metrics.md, Revisions)."""
    return {attribute + RETRACTED: PartitionFamily(
        family.name + RETRACTED,
        f"What re-scored conversations' later revisions retracted from {family.name}_total (the recording rules "
        "subtract it; exported by the partition's current owner).", family.labels)
        for attribute, family in families.items()}


# The judged slice's terms of the corrected rate (docs/metrics.md, "Corrected rates"): the judge's yes y (1/0) and
# the distilled probability f of the same conversation, weighted by w = 1/pi, and by q = w (w - 1) for the
# Poisson-sampling variance. Counters only go up, so the residual y - f is counted as its two non-negative parts.
RESIDUAL_TERMS = {
    "residual_weight": ("convmon_partition_rubric_residual_weight",
                        "Sum of w = 1/pi over judged conversations that a distilled model also scored"),
    "residual_yes": ("convmon_partition_rubric_residual_yes", "Sum of w y, y the judge's yes (1, else 0)"),
    "residual_probability": ("convmon_partition_rubric_residual_probability",
                             "Sum of w f, f the distilled probability of the same conversation"),
    "residual_design_weight": ("convmon_partition_rubric_residual_design_weight",
                               "Sum of q = w (w - 1) = (1 - pi) w^2, the Poisson-sampling variance weight"),
    "residual_design_yes": ("convmon_partition_rubric_residual_design_yes", "Sum of q y"),
    "residual_design_probability": ("convmon_partition_rubric_residual_design_probability", "Sum of q f"),
    "residual_design_squares": ("convmon_partition_rubric_residual_design_squares", "Sum of q (y - f)^2"),
}


PARTITION_ONLY = frozenset({*RESIDUAL_TERMS, "agreement_pairs"})  # counted as partition totals only


def residual_families(dims: tuple[str, ...]) -> dict[str, PartitionFamily]:
    """The corrected rate's terms, counted only as partition totals (crash-safe; no per-worker twin)."""
    return {attribute: PartitionFamily(name, f"{doc}, in an input partition (the corrected rate's term; exported by "
                                             "the partition's current owner).", ("rubric", "polarity", *dims))
            for attribute, (name, doc) in RESIDUAL_TERMS.items()}


class Metrics(StreamMetrics, ScoreMetrics, JudgeMetrics, ModelMetrics, OtelMetrics):
    """Every metric a worker exports, as attributes (``metrics.scored``, ``metrics.judge_spend``, ...); declared
    by area in the base classes, on one registry."""

    def __init__(self, registry: CollectorRegistry, *, dimensions: tuple[str, ...] = ()) -> None:
        self.registry = registry
        self.dimensions = tuple(dimensions)
        dims = list(self.dimensions)
        self.partition_families = partition_families(self.dimensions)
        StreamMetrics.__init__(self, registry, dims)
        ScoreMetrics.__init__(self, registry, dims)
        JudgeMetrics.__init__(self, registry)
        ModelMetrics.__init__(self, registry)
        OtelMetrics.__init__(self, registry)

    def init_rubric(self, rubric: RubricSet, scorers: tuple[str, ...] = ("llm", "distilled")) -> None:
        """Create every item's series at zero so rates exist before the first verdict."""
        if self.dimensions:
            return  # dimensioned series appear with their first observation
        for item in rubric.items:
            for scorer in scorers:
                self.probability_sum.labels(item.id, item.polarity, scorer)
                for verdict in ZERO_VERDICTS:
                    self.verdicts.labels(item.id, item.polarity, scorer, verdict)


class RetrainMetrics:
    """What ``convmon retrain`` serves on its own /metrics: rounds by part and outcome, and when."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.rounds = Counter(
            "convmon_retrain_rounds",
            "Retraining rounds by part (distilled, calibration) and outcome (promoted, rejected, skipped, "
            "failed); a failed part is logged and retried at the next scheduled round.",
            ["part", "outcome"],
            registry=r,
        )
        self.duration = Histogram(
            "convmon_retrain_duration_seconds", "Duration of each part of a retraining round.", ["part"],
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600), registry=r,
        )
        self.last_success = Gauge(
            "convmon_retrain_last_success_timestamp_seconds",
            "When a part last finished without failing (promoted, rejected or skipped), Unix time.",
            ["part"],
            registry=r,
        )
        self.next_round = Gauge(
            "convmon_retrain_next_round_timestamp_seconds", "When the next scheduled round starts, Unix time.",
            registry=r,
        )
        for part in ("distilled", "calibration"):
            self.duration.labels(part)
            self.last_success.labels(part)  # 0 until a part succeeds: alertable from the start
            for outcome in ("promoted", "rejected", "skipped", "failed"):
                self.rounds.labels(part, outcome)
