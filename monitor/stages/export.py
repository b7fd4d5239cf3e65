"""Export stage: score records in, Prometheus series out.

Each worker counts only what it consumed; sums across workers, rates and ratios are PromQL's job
(see ``deploy/prometheus/rules``). Metadata dimensions (app, locale, model version) become labels
through an allow-list (metadata is producer-supplied and may hold user data, so a value
nobody configured is exported as ``other``), optionally widened by a safe pattern with a cap on
distinct values per dimension, and a global series budget over all dimensions together, so a
misbehaving producer can never blow up the series count nor put user data in a label: past either,
values are exported as ``other`` (counted; the record itself is always counted). Exemplars carry an
opaque reference (monitor/judge/reference.py), never the conversation id.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from prometheus_client import Counter

from monitor.contracts.errors import ConfigError
from monitor.contracts.metrics import PARTITION_ONLY, Metrics, verdict_siblings
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.scores import ItemResult, ScoreRecord, verdict_label
from monitor.judge.reference import ConversationRef
from monitor.stages.corrected import Series, agreement_pairs, residual_terms

if TYPE_CHECKING:
    from monitor.contracts.events import Conversation
    from monitor.drift.monitor import DriftMonitor

OTHER = "other"
UNKNOWN = "unknown"  # the record has no value for the dimension
MAX_VALUE_CHARS = 64
# Exemplar labels: "conversation_ref" + 24 characters + "trace_id" + 32 = 80, under the OpenMetrics 128.


def dimension_notice(dimensions: Sequence[str], *, allowed: Mapping[str, Sequence[str]], pattern: str | None,
                     cap: int) -> str:
    """One line for the worker's start: which metadata keys become labels, which values are kept, and where
    ``other`` comes from (an unlisted value is otherwise only seen as ``convmon_dimension_overflow_total``)."""
    if not dimensions:
        return "metric dimensions: none (CONVMON_METRIC_DIMENSIONS is empty): no metadata becomes a label"
    listed = ", ".join(f"{d} ({'/'.join(allowed[d])})" if allowed.get(d) else d for d in dimensions)
    if pattern:
        kept = (f"values listed in CONVMON_DIMENSION_VALUES, and values matching CONVMON_DIMENSION_VALUE_PATTERN "
                f"first-come up to {cap} per dimension, are exported as themselves")
    else:
        kept = "only values listed in CONVMON_DIMENSION_VALUES are exported as themselves"
    return (f"metric dimensions: {listed}; {kept}; any other value is exported as \"other\" "
            "(convmon_dimension_overflow_total{dimension}; docs/settings.md)")


class DimensionLabels:
    """Maps a record's metadata to bounded label values, one per configured dimension.

    Values listed in ``allowed`` are always kept. Any other value is exported as ``other`` unless
    ``pattern`` (``dimension_value_pattern``) is set and matches it whole: then it is kept first-come
    until the dimension holds ``cap`` distinct values (first-come is per worker, so list the values you
    care about in ``allowed`` to make every worker agree). Without a pattern no label ever carries a
    value nobody configured: metadata is producer-supplied and may be an e-mail or a phone number.
    """

    def __init__(
        self, dimensions: Sequence[str], *, cap: int, allowed: Mapping[str, Sequence[str]] | None = None,
        pattern: str | None = None,
    ) -> None:
        if cap < 1:
            raise ConfigError(f"The dimension cap must be an integer >= 1. Got {cap} instead.")
        self.dimensions = tuple(dimensions)
        self.cap = cap
        allowed = allowed or {}
        unknown = sorted(set(allowed) - set(self.dimensions))
        if unknown:
            raise ConfigError(f"dimension_values names {unknown}, which are not in metric_dimensions")
        self._seen: dict[str, set[str]] = {d: {v[:MAX_VALUE_CHARS] for v in allowed.get(d, ())} for d in dimensions}
        try:
            self.pattern = re.compile(pattern) if pattern else None
        except re.error as exc:
            raise ConfigError(f"dimension_value_pattern {pattern!r} is not a regular expression: {exc} "
                              "(CONVMON_DIMENSION_VALUE_PATTERN)") from exc
        self.max_combinations: int | None = None  # the global budget: see set_budget
        self._combinations: set[tuple[str, ...]] = set()

    def values(self, metadata: Mapping[str, str]) -> tuple[tuple[str, ...], list[str]]:
        """Label values in dimension order, and the dimensions that overflowed to ``other``."""
        out: list[str] = []
        overflowed: list[str] = []
        for dim in self.dimensions:
            value = (metadata.get(dim) or "")[:MAX_VALUE_CHARS]
            seen = self._seen[dim]
            if not value:
                out.append(UNKNOWN)
            elif value in seen:
                out.append(value)
            elif self.pattern is None or not self.pattern.fullmatch(value):
                out.append(OTHER)  # not allowed: never a label value; counted, so unlisted values show
                overflowed.append(dim)
            elif len(seen) < self.cap:
                seen.add(value)
                out.append(value)
            else:
                out.append(OTHER)
                overflowed.append(dim)
        return tuple(out), overflowed

    def set_budget(self, max_combinations: int) -> None:
        """At most this many distinct combinations of values (label sets), all dimensions together."""
        if max_combinations < 1:
            raise ConfigError("metric_series_budget (CONVMON_METRIC_SERIES_BUDGET) is too small for one label set "
                              "of this rubric; raise it")
        self.max_combinations = max_combinations

    def within_budget(self, values: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
        """``values``, or the nearest admitted combination with trailing values folded into ``other``, and the
        dimensions folded. One label set is kept for all-``other``, so the budget is never passed."""
        budget = self.max_combinations
        if budget is None or not values or values in self._combinations:
            return values, []
        if len(self._combinations) < budget - 1:
            self._combinations.add(values)
            return values, []
        everything_other = (OTHER,) * len(values)
        for keep in range(len(values) - 1, -1, -1):  # fold the last dimension first, then the last two, ...
            candidate = values[:keep] + everything_other[keep:]
            if candidate in self._combinations or candidate == everything_other:
                self._combinations.add(candidate)
                folded = [d for d, v in zip(self.dimensions[keep:], values[keep:], strict=True) if v != OTHER]
                return candidate, folded
        raise AssertionError("unreachable: the all-other combination always matches")

    @property
    def combinations(self) -> int:
        return len(self._combinations)



def series_per_label_set(n_items: int, scorers: int = 2) -> int:
    """Series one combination of dimension values can create: per scorer, the scored count, the satisfaction
    sum and its count, and per item three verdicts (yes, no, uncertain) and a probability sum."""
    return scorers * (3 + 4 * n_items)


def conversation_exemplar(score: ScoreRecord, ref: ConversationRef) -> dict[str, str]:
    """OpenMetrics exemplar labels (at most 128 characters in all): the conversation's opaque reference
    (``convmon inspect``/``forget`` resolve it through the score store), and the judged call's trace id when
    the input carried one (Grafana links ``trace_id`` exemplars to Tempo)."""
    labels = {"conversation_ref": ref(score.conversation_id)}
    if score.span:
        labels["trace_id"] = score.span[:32]
    return labels


def item_probability(item: ItemResult) -> float:
    """P(yes) for the expected-rate sums: the probability if any, else the verdict as 1/0 (0.5 if uncertain).

    Every scored record adds a term for every item, so dividing the sum by the scored count is an
    unbiased mean rather than a mean over the records that happened to carry probabilities.
    """
    if item.probability is not None:
        return item.probability
    if item.uncertain or item.verdict is None:
        return 0.5
    return 1.0 if item.verdict else 0.0


class Exporter:
    """Turns score records into counter increments (summed per batch: one ``inc`` per series), and feeds
    the drift monitor."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        dimensions: list[str],
        cap: int,
        rubric: RubricSet,
        drift: DriftMonitor | None = None,
        allowed_values: Mapping[str, Sequence[str]] | None = None,
        value_pattern: str | None = None,
        series_budget: int | None = None,
        reference: ConversationRef | None = None,
    ) -> None:
        if tuple(dimensions) != metrics.dimensions:
            raise ConfigError(
                f"The exporter's dimensions {list(dimensions)} must equal the ones the metrics were "
                f"declared with {list(metrics.dimensions)}; build both from settings.metric_dimensions."
            )
        self.metrics = metrics
        self.rubric = rubric
        self.drift = drift
        # Called with every counted record (verdicts out as OTLP evaluation events when configured).
        self.evaluations: Callable[[ScoreRecord], None] | None = None
        # Called when the judge gave no score for a conversation (and why): error events out when configured.
        self.evaluation_failures: Callable[[Conversation, str], None] | None = None
        self.labels = DimensionLabels(dimensions, cap=cap, allowed=allowed_values, pattern=value_pattern)
        # No key given (tests, tools): a random one, so exemplars are still opaque, just not resolvable.
        self.reference = reference or ConversationRef(secrets.token_bytes(32))
        self._polarity = {item.id: item.polarity for item in rubric.items}
        self._children: dict[Series, Counter] = {}  # as bounded as the series themselves
        metrics.init_rubric(rubric)
        for reason in ("unknown_item",):
            metrics.export_skipped.labels(reason)
        for scorer in ("llm", "distilled"):
            metrics.scored_weight.labels(scorer)
            metrics.scored_weight_squared.labels(scorer)
            for item in rubric.items:
                metrics.weighted_probability_sum.labels(item.id, item.polarity, scorer)
        for dim in dimensions:
            metrics.dimension_overflow.labels(dim)
            metrics.label_folds.labels(dim)
        if series_budget is not None and dimensions:
            self.labels.set_budget(series_budget // series_per_label_set(len(rubric.items)))
            metrics.label_sets_limit.set(self.labels.max_combinations or 0)

    def _child(self, series: Series) -> Counter:
        child = self._children.get(series)
        if child is None:
            counter: Counter = getattr(self.metrics, series[0])
            child = self._children[series] = counter.labels(*series[1])
            if series[0] == "verdicts":
                for sibling in verdict_siblings(series[1]):
                    counter.labels(*sibling)
        return child

    def observe(self, score: ScoreRecord) -> None:
        """Count one score record (the caller drops duplicates before this)."""
        self.observe_batch([score])

    def observe_batch(self, scores: Sequence[ScoreRecord], shadows: Mapping[str, Mapping[str, float]] | None = None,
                      each: list[dict[Series, float]] | None = None) -> dict[Series, float]:
        """Count a batch of score records (duplicates already dropped): each counter series is incremented
        once with the batch's sum. Returns every increment, for the per-partition totals.

        ``shadows`` maps a judged conversation's id to the distilled probabilities the hot path scored it with
        (judge-topic header ``convmon-distilled``): its judge record then adds the residual terms of the
        corrected rate (:func:`residual_terms`) and the judge/distilled agreement pairs, which only the partition
        totals count. ``each``, when given, gets every record's own increments, in order (what a later revision of
        its conversation retracts)."""
        m = self.metrics
        tally: dict[Series, float] = {}
        exemplars: dict[Series, dict[str, str]] = {}  # the drill-down: the last "yes" of each verdict series

        # where a record's increments go: the batch's tally, or (with ``each``) the record's own
        t: dict[Series, float] = tally
        get = t.get

        def add(series: Series, amount: float = 1.0) -> None:
            t[series] = t.get(series, 0.0) + amount

        for score in scores:
            if each is not None:
                t = {}
                get = t.get
            scorer = score.scorer
            exemplar: dict[str, str] | None = None  # one keyed hash per record, not one per "yes" verdict
            dims, overflowed = self.labels.values(score.metadata)
            for dim in overflowed:
                add(("dimension_overflow", (dim,)))
            before = self.labels.combinations
            dims, folded = self.labels.within_budget(dims)
            for dim in folded:
                add(("label_folds", (dim,)))
            if self.labels.combinations != before:
                m.label_sets.set(self.labels.combinations)
            add(("scored", (scorer, *dims)))
            add(("scored_weight", (scorer,)), score.sample_weight)
            add(("scored_weight_squared", (scorer,)), score.sample_weight ** 2)
            for item in score.items:
                polarity = self._polarity.get(item.item_id)
                if polarity is None:  # item ids are label values: never export one the rubric does not know
                    add(("export_skipped", ("unknown_item",)))
                    continue
                p = item_probability(item)
                verdict = verdict_label(scorer, item)
                series: Series = ("verdicts", (item.item_id, polarity, scorer, verdict, *dims))
                t[series] = get(series, 0.0) + 1.0  # add() inlined here: 20 items a record, 3 series each
                if verdict == "yes":
                    exemplar = exemplar or conversation_exemplar(score, self.reference)
                    exemplars[series] = exemplar
                series = ("probability_sum", (item.item_id, polarity, scorer, *dims))
                t[series] = get(series, 0.0) + p
                series = ("weighted_probability_sum", (item.item_id, polarity, scorer))
                t[series] = get(series, 0.0) + p * score.sample_weight
            shadow = shadows.get(score.conversation_id) if shadows and scorer == "llm" else None
            if shadow:
                residual_terms(score, shadow, self._polarity, dims, add)
                agreement_pairs(score, shadow, self._polarity, add)
            if score.satisfaction is not None:
                add(("satisfaction_sum", (scorer, *dims)), score.satisfaction)
                add(("satisfaction_calibrated", (scorer, *dims)))  # the sum's denominator
            m.r_score.labels(scorer).observe(score.R)
            if score.ended_at is not None:  # producer clocks may run ahead: never a negative delay
                m.score_delay.labels(scorer).observe(max(0.0, time.time() - score.ended_at))
            if self.drift is not None:
                self.drift.observe(score)
            if self.evaluations is not None:
                self.evaluations(score)
            if each is not None:
                each.append(t)
                for series, amount in t.items():
                    tally[series] = tally.get(series, 0.0) + amount
        for series, amount in tally.items():
            if series[0] not in PARTITION_ONLY:
                self._child(series).inc(amount, exemplar=exemplars.get(series))
        return tally


def update_consumer_lag(metrics: Metrics, topic: str, lag: int | float) -> None:
    """Record how many messages this worker's partitions of ``topic`` are behind the log end.

    Each worker reports the lag of the partitions it owns, so ``sum by (topic)`` is the group's lag;
    report 0 for a topic whose partitions were all revoked, or the old value lingers.
    """
    metrics.consumer_lag.labels(topic).set(max(0.0, float(lag)))


def update_partition_progress(metrics: Metrics, progress: Mapping[tuple[str, int], tuple[int, int]],
                              previous: set[tuple[str, int]]) -> set[tuple[str, int]]:
    """Per-partition (lag, position) of the partitions this worker owns now; the series of partitions it
    lost are removed (a lingering non-zero lag with a frozen position would look like a stall).
    Returns the set to pass as ``previous`` next time."""
    for topic, partition in previous - set(progress):
        metrics.partition_lag.remove(topic, str(partition))
        metrics.partition_position.remove(topic, str(partition))
    for (topic, partition), (lag, position) in progress.items():
        metrics.partition_lag.labels(topic, str(partition)).set(max(0, lag))
        metrics.partition_position.labels(topic, str(partition)).set(position)
    return set(progress)
