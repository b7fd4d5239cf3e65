"""The models' health: the live distilled and calibration models, the label store, drift detectors and
judge/distilled agreement. Part of :class:`monitor.contracts.metrics.Metrics`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Info


class ModelMetrics:
    """Whether the live models still hold: which is live, drift against their reference, agreement."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        # --- models, drift, agreement -----------------------------------------------------------
        self.model_info = Info("convmon_model", "The live distilled model.", registry=r)
        self.model_last_trained = Gauge(
            "convmon_model_last_trained_timestamp_seconds", "When the live distilled model was trained.",
            registry=r,
        )
        # --- calibration: P(satisfied) of judge scores, see monitor/stages/calibrate.py ------------------
        self.calibration_info = Info(
            "convmon_calibration", "The live LLM-Rubric calibration model and the label source it serves.",
            registry=r,
        )
        self.calibration_last_trained = Gauge(
            "convmon_calibration_last_trained_timestamp_seconds", "When the live calibration model was trained.",
            registry=r,
        )
        self.label_store_errors = Counter(
            "convmon_label_store_errors", "Failed label-store writes (retried from the buffer).", registry=r
        )
        self.label_store_buffered = Gauge(
            "convmon_label_store_buffered", "Label records waiting in the write buffer.", registry=r
        )
        self.rejected_repeats = Counter(
            "convmon_label_store_rejected_repeats",
            "Records the label or score store refused for a conversation already dead-lettered for the same reason "
            "(its label and its score records): counted here, not dead-lettered again.",
            ["reason"],
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

