"""Every Prometheus metric convmon exports, declared once, on a registry passed in.

Naming follows prometheus conventions: prefix ``convmon_``, base units (seconds, bytes, USD),
``_total`` on counters. Labels are bounded: rubric item ids, polarity, scorer, reason codes and
the configured metadata dimensions (capped, overflowing to ``other``), never conversation ids.
Each worker exports its own series; rates and sums across workers are PromQL's job.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from monitor.contracts.rubric_set import RubricSet

R_BUCKETS = (-60, -40, -30, -20, -10, -5, -2, 0, 2, 5, 10, 20, 30, 40, 60)
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
# From a conversation's end to its score being counted: seconds (distilled) to an hour (judge backlog).
DELAY_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200)
BATCH_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


@dataclass(frozen=True)
class PartitionFamily:
    """A per-partition running total (monitor/stages/totals.py), exported by the partition's owner."""

    name: str  # exported with ``_total``
    documentation: str
    labels: tuple[str, ...]  # after ``partition``


def partition_families(dimensions: tuple[str, ...]) -> dict[str, PartitionFamily]:
    """Metrics attribute -> the per-partition total that mirrors it (issue #18 item 6).

    The per-worker counters stay as they were; these are their partition-owned, crash-safe twins.
    Each multiplies its series by the partition count (``topic_partitions``)."""
    dims = tuple(dimensions)
    return {
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
    }


class Metrics:
    def __init__(self, registry: CollectorRegistry, *, dimensions: tuple[str, ...] = ()) -> None:
        self.registry = registry
        self.dimensions = tuple(dimensions)
        dims = list(self.dimensions)
        self.partition_families = partition_families(self.dimensions)
        r = registry
        # --- flow ---------------------------------------------------------------------------
        self.events = Counter("convmon_events", "Input records consumed, by kind.", ["kind"], registry=r)
        self.conversations = Counter(
            "convmon_conversations_finished",
            "Conversations finished by the sessionizer, by how they ended (end event, idle, producer).",
            ["end_reason"],
            registry=r,
        )
        self.truncated = Counter(
            "convmon_conversations_truncated",
            "Conversations cut to the configured max turns / characters.",
            registry=r,
        )
        self.late_events = Counter(
            "convmon_late_events",
            "Events for conversations already finished that they did not hold (late end/turn events).",
            ["kind"],
            registry=r,
        )
        self.redelivered = Counter(
            "convmon_redelivered_events",
            "Events of finished conversations that they already held (a batch delivered again before its offsets "
            "were committed, e.g. across a broker restart): skipped, not dead-lettered.",
            ["kind"],
            registry=r,
        )
        self.routed = Counter(
            "convmon_conversations_routed",
            "Routing decisions: the judge slice (uniform or active learning) or distilled only.",
            ["route"],
            registry=r,
        )
        self.judge_sampled = Counter(
            "convmon_judge_sampled",
            "Conversations sent to the judge, by what put them in the slice: hash (the uniform slice), uncertainty "
            "(the distilled models' boost) or feedback (negative user feedback).",
            ["by"],
            registry=r,
        )
        self.judge_nonresponse = Counter(
            "convmon_judge_nonresponse",
            "Judge-topic records that produced no score (judge failure or invalid record), by reason: non-response "
            "of the judge sample. Judge-based rates are over the respondents.",
            ["reason"],
            registry=r,
        )
        self.judge_nonresponse_weight = Counter(
            "convmon_judge_nonresponse_weight",
            "Sum of the importance weights 1/pi of judge non-responses: their share of the weighted judge sample is "
            "nonresponse_weight / (nonresponse_weight + conversations_scored_weight{scorer=\"llm\"}).",
            registry=r,
        )
        self.scored = Counter(
            "convmon_conversations_scored", "Score records exported, by scorer.", ["scorer", *dims], registry=r
        )
        self.unscored = Counter(
            "convmon_conversations_unscored",
            "Conversations the distilled path could not score, by reason (e.g. no live model yet).",
            ["reason"],
            registry=r,
        )
        self.duplicates = Counter(
            "convmon_duplicate_scores",
            "Score records dropped because that (conversation, scorer) was already counted.",
            ["scorer"],
            registry=r,
        )
        self.score_delay = Histogram(
            "convmon_score_delay_seconds",
            "End-to-end latency: from a conversation's end (its end event's timestamp, or its last event when it "
            "ended idle) to its score being counted, by scorer.",
            ["scorer"],
            buckets=DELAY_BUCKETS,
            registry=r,
        )
        # --- OTLP input (issue #21, input_format otlp_traces / otlp_logs) -------------------------
        self.otlp_records = Counter(
            "convmon_otlp_records",
            "Spans / log records read from OTLP input, by signal and outcome: turns (a GenAI call made turns), "
            "no_content (content capture off), not_genai, no_conversation (no conversation id), malformed.",
            ["signal", "outcome"],
            registry=r,
        )
        self.repeated_turns = Counter(
            "convmon_repeated_turns",
            "Turns skipped because the session already holds them (each OTLP call repeats the chat history).",
            registry=r,
        )
        # --- delivery (issue #18 item 7): a record the broker did not take stops commits, then the worker ----
        self.delivery_failures = Counter(
            "convmon_delivery_failures",
            "Records (sends and table changelog writes) the broker did not acknowledge, by topic; the worker "
            "stops committing offsets and exits so its successor re-reads from the last commit.",
            ["topic"],
            registry=r,
        )
        self.commits_blocked = Gauge(
            "convmon_offset_commits_blocked",
            "1 once a delivery failed in this worker: it commits no more offsets and is about to exit.",
            registry=r,
        )
        self.commits_refused = Counter(
            "convmon_offset_commits_refused", "Offset commits refused after a failed delivery.", registry=r
        )
        self.dead_letters = Counter(
            "convmon_dead_letters", "Records sent to the dead-letter topic, by reason.", ["reason"], registry=r
        )
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
        # --- judge operations -------------------------------------------------------------------
        self.judge_requests = Counter(
            "convmon_judge_requests", "Judge API requests, by status.", ["model", "status"], registry=r
        )
        self.judge_latency = Histogram(
            "convmon_judge_request_duration_seconds",
            "Judge API request latency.",
            ["model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.judge_tokens = Counter(
            "convmon_judge_tokens", "Judge tokens, by kind (prompt, completion, cached).", ["model", "kind"],
            registry=r,
        )
        self.judge_spend = Counter("convmon_judge_spend_usd", "Judge spend in US dollars.", ["model"], registry=r)
        self.judge_budget_remaining = Gauge(
            "convmon_judge_budget_remaining_usd", "What is left of today's judge budget.", registry=r
        )
        self.judge_budget_exhausted = Gauge(
            "convmon_judge_budget_exhausted", "1 while the daily judge budget is spent.", registry=r
        )
        # --- judge budget (issue #19): booked in the label store's database, shared by every worker --------
        self.judge_budget_spent = Gauge(
            "convmon_judge_budget_spent_usd",
            "Today's (UTC) judge spend booked across all workers, in-flight reservations included, as this "
            "worker last read it from the ledger (the same cluster total on every worker: use max()).",
            registry=r,
        )
        self.judge_budget_booked = Counter(
            "convmon_judge_budget_booked_usd",
            "Judge spend this worker booked (each call at most its locally computed bound): sum() over workers.",
            registry=r,
        )
        self.judge_budget_store_errors = Counter(
            "convmon_judge_budget_store_errors",
            "Failed reads/writes of the budget ledger (judging waits while it is unreachable).",
            registry=r,
        )
        self.judge_usage_capped = Counter(
            "convmon_judge_usage_capped",
            "Judge responses whose reported usage exceeded the locally computed bound (booked at the bound).",
            ["model"],
            registry=r,
        )
        self.judge_parse_failures = Counter(
            "convmon_judge_parse_failures", "Judge answers that failed to parse or missed items.", registry=r
        )
        self.judge_answers_rejected = Counter(
            "convmon_judge_answers_rejected",
            "Judge answers refused by strict validation, by problem (not_json, prose, several_objects, extra_keys, "
            "missing_keys, bad_value); each gets a repair prompt, a second failure is dead-lettered.",
            ["problem"],
            registry=r,
        )
        self.judge_answer_repairs = Counter(
            "convmon_judge_answer_repairs",
            "Judge answers accepted only through the configured repair (judge_answer_repair), by kind "
            "(prose_stripped, lenient).",
            ["kind"],
            registry=r,
        )
        self.judge_repairs = Counter(
            "convmon_judge_repairs", "Repair prompts sent after a bad judge answer, by outcome.", ["outcome"],
            registry=r,
        )
        self.judge_retries = Counter(
            "convmon_judge_retries", "Judge retries, by cause (429, 5xx, timeout).", ["cause"], registry=r
        )
        self.jury_disagreements = Counter(
            "convmon_jury_disagreements", "Items on which jury members disagreed.", ["rubric"], registry=r
        )
        self.judge_in_flight = Gauge("convmon_judge_in_flight", "Judge requests in flight.", registry=r)
        # --- models, drift, agreement -----------------------------------------------------------
        self.model_info = Info("convmon_model", "The live distilled model.", registry=r)
        self.model_last_trained = Gauge(
            "convmon_model_last_trained_timestamp_seconds", "When the live distilled model was trained.",
            registry=r,
        )
        # --- calibration (issue #7): P(satisfied) of judge scores, see monitor/stages/calibrate.py ------
        self.calibration_info = Info(
            "convmon_calibration", "The live LLM-Rubric calibration model and the label source it serves.",
            registry=r,
        )
        self.calibration_last_trained = Gauge(
            "convmon_calibration_last_trained_timestamp_seconds", "When the live calibration model was trained.",
            registry=r,
        )
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
        self.label_store_errors = Counter(
            "convmon_label_store_errors", "Failed label-store writes (retried from the buffer).", registry=r
        )
        self.label_store_buffered = Gauge(
            "convmon_label_store_buffered", "Label records waiting in the write buffer.", registry=r
        )
        self.consumer_lag = Gauge(
            "convmon_consumer_lag_messages", "Messages behind the log end, per topic.", ["topic"], registry=r
        )
        self.partition_lag = Gauge(
            "convmon_consumer_partition_lag_messages",
            "Messages behind the log end, per partition this worker owns (removed when it loses the partition).",
            ["topic", "partition"],
            registry=r,
        )
        self.partition_position = Gauge(
            "convmon_consumer_partition_position",
            "The next offset this worker reads, per partition it owns: flat while lag > 0 means a stalled partition.",
            ["topic", "partition"],
            registry=r,
        )
        # --- export (added for issue #5) -------------------------------------------------------
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
            "Metadata values exported as 'other' because the dimension reached its cap of distinct values.",
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
        # --- drift (computed in the worker, see monitor/drift) ----------------------------------
        self.drift_psi = Gauge(
            "convmon_drift_psi",
            "Population stability index of the distilled probabilities: sliding window vs reference.",
            ["rubric"],
            registry=r,
        )
        self.drift_jsd = Gauge(
            "convmon_drift_jsd",
            "Jensen-Shannon divergence (base 2, 0..1) of the distilled probabilities: window vs reference.",
            ["rubric"],
            registry=r,
        )
        self.drift_statistic = Gauge(
            "convmon_drift_statistic",
            "Change-point statistic of an item's rate (page_hinkley, cusum), in standard errors of a batch.",
            ["rubric", "detector", "scorer"],
            registry=r,
        )
        self.drift_detected = Gauge(
            "convmon_drift_detected",
            "1 while a detector has flagged drift on an item within the hold period, else 0.",
            ["rubric", "detector", "scorer"],
            registry=r,
        )
        self.drift_detections = Counter(
            "convmon_drift_detections",
            "Drift detections, by item and detector: alert on its increase, it sums across workers.",
            ["rubric", "detector", "scorer"],
            registry=r,
        )
        self.drift_reference_size = Gauge(
            "convmon_drift_reference_size",
            "Observations in an item's drift reference window (0 while the first-N fallback is filling).",
            ["rubric"],
            registry=r,
        )
        self.feature_drift_auc = Gauge(
            "convmon_feature_drift_auc",
            "Cross-validated AUC of a classifier telling the recent window from the reference (0.5 = no drift).",
            ["source"],
            registry=r,
        )
        self.feature_drift_mean_shift = Gauge(
            "convmon_feature_drift_mean_shift",
            "Largest per-feature mean shift of the recent window, in reference standard deviations.",
            ["source"],
            registry=r,
        )
        self.agreement_accuracy = Gauge(
            "convmon_agreement_accuracy",
            "Judge vs distilled agreement on the shadow-scored slice (distilled at 0.5), over a window.",
            ["rubric"],
            registry=r,
        )
        self.agreement_auc = Gauge(
            "convmon_agreement_auc",
            "AUC of the distilled probability against the judge verdict on the shadow slice, over a window.",
            ["rubric"],
            registry=r,
        )
        self.agreement_window = Gauge(
            "convmon_agreement_window_size", "Shadow pairs in the agreement window.", ["rubric"], registry=r
        )
        self.agreement_pairs = Counter(
            "convmon_agreement_pairs",
            "Shadow pairs by judge and distilled verdict: accuracy across workers is PromQL arithmetic on it.",
            ["rubric", "judge", "distilled"],
            registry=r,
        )

    def init_rubric(self, rubric: RubricSet, scorers: tuple[str, ...] = ("llm", "distilled")) -> None:
        """Create every item's series at zero so rates exist before the first verdict."""
        if self.dimensions:
            return  # dimensioned series appear with their first observation
        for item in rubric.items:
            for scorer in scorers:
                self.probability_sum.labels(item.id, item.polarity, scorer)
                for verdict in ("yes", "no"):
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
