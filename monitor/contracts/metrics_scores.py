"""The satisfaction metrics: per-item verdicts and probabilities (dimensioned), the distilled batches, the
importance-weighted sums and the series budget. Part of :class:`monitor.contracts.metrics.Metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

R_BUCKETS = (-60, -40, -30, -20, -10, -5, -2, 0, 2, 5, 10, 20, 30, 40, 60)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
BATCH_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ScoreMetrics:
    """What the scores say, and what exporting them cost in series."""

    def __init__(self, registry: CollectorRegistry, dims: Sequence[str] = ()) -> None:
        r = registry
        # --- satisfaction -----------------------------------------------------------------------
        self.verdicts = Counter(
            "convmon_rubric_verdicts",
            "Per-item verdicts: yes/no (llm, or distilled at the item's trained threshold); uncertain when a jury "
            "disagreed.",
            ["rubric", "polarity", "scorer", "verdict", *dims],
            registry=r,
        )
        self.probability_sum = Counter(
            "convmon_rubric_probability_sum",
            "Sum of per-item probabilities: divided by convmon_conversations_scored it is the expected rate.",
            ["rubric", "polarity", "scorer", *dims],
            registry=r,
        )
        self.satisfaction_sum = Counter(
            "convmon_satisfaction_probability_sum",
            "Sum of calibrated P(satisfied): an expected count of satisfied conversations.",
            ["scorer", *dims],
            registry=r,
        )
        self.r_score = Histogram(
            "convmon_satisfaction_r",
            "SPUR aggregate R = sum(SAT scores) - sum(DSAT scores), per conversation.",
            ["scorer"],
            buckets=R_BUCKETS,
            registry=r,
        )
        # --- distilled path ---------------------------------------------------------------------
        self.classify_batch_size = Histogram(
            "convmon_classify_batch_conversations",
            "Conversations per distilled scoring batch: near classify_batch under load, small when idle.",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.classify_batch_duration = Histogram(
            "convmon_classify_batch_duration_seconds",
            "Wall time to featurize, predict and build the records of one batch (the distilled path's service time).",
            buckets=BATCH_DURATION_BUCKETS,
            registry=r,
        )
        # --- calibration: how many score records carried P(satisfied) --------------------------------
        self.satisfaction_calibrated = Counter(
            "convmon_satisfaction_calibrated",
            "Score records that carried a calibrated P(satisfied): the denominator of "
            "convmon_satisfaction_probability_sum.",
            ["scorer", *dims],
            registry=r,
        )
        self.satisfaction_uncalibrated = Counter(
            "convmon_satisfaction_uncalibrated",
            "Judge score records exported without P(satisfied), by reason (no_model, other_judge, other_rubric, "
            "error).",
            ["reason"],
            registry=r,
        )
        # --- export ---------------------------------------------------------------------------
        self.scored_weight = Counter(
            "convmon_conversations_scored_weight",
            "Sum of routing importance weights of scored conversations: the denominator of unbiased rates.",
            ["scorer"],
            registry=r,
        )
        self.scored_weight_squared = Counter(
            "convmon_conversations_scored_weight_squared",
            "Sum of squared importance weights: Kish's effective sample size of a weighted rate is "
            "scored_weight^2 / scored_weight_squared (the n a rate's confidence interval needs).",
            ["scorer"],
            registry=r,
        )
        self.weighted_probability_sum = Counter(
            "convmon_rubric_weighted_probability_sum",
            "Sum of per-item probabilities times the routing importance weight (corrects boosted sampling).",
            ["rubric", "polarity", "scorer"],
            registry=r,
        )
        self.export_skipped = Counter(
            "convmon_export_skipped_items",
            "Score items not exported, by reason (unknown_item: not in the live rubric set).",
            ["reason"],
            registry=r,
        )
        self.dimension_overflow = Counter(
            "convmon_dimension_overflow",
            "Metadata values exported as 'other': not listed in dimension_values (nor matching "
            "dimension_value_pattern), or past the dimension's cap of distinct values.",
            ["dimension"],
            registry=r,
        )
        self.label_folds = Counter(
            "convmon_metric_label_folds",
            "Dimension values exported as 'other' because their new combination would have passed the global "
            "series budget (CONVMON_METRIC_SERIES_BUDGET), by dimension. The record is still counted.",
            ["dimension"],
            registry=r,
        )
        self.label_sets = Gauge(
            "convmon_metric_label_sets",
            "Distinct combinations of dimension values exported so far by this worker.",
            registry=r,
        )
        self.label_sets_limit = Gauge(
            "convmon_metric_label_sets_limit",
            "Most combinations of dimension values the series budget allows for the live rubric set.",
            registry=r,
        )
