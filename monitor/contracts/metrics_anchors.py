"""What ``convmon anchors run`` serves on its own /metrics: judge drift on the anchor set, per rubric item."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

ANCHOR_TESTS = ("verdicts", "humans")
RUN_REASONS = ("first", "schedule", "provenance")
RUN_OUTCOMES = ("complete", "incomplete", "failed")


class AnchorMetrics:
    """Judge drift on the re-judged anchors; ``rubric`` is the item id, as on the worker's rate metrics."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.drift = Gauge(
            "convmon_judge_drift",
            "1 when the judge's verdicts on this item's anchors changed since the baseline run (anytime-valid test "
            "at CONVMON_ANCHORS_ALPHA over the rubric); 0 otherwise.",
            ["rubric"], registry=r)
        self.evalue = Gauge(
            "convmon_judge_drift_evalue",
            "The item's e-process on the anchors (verdicts: against the baseline runs; humans: against the human "
            "labels); drift at 2 x items / CONVMON_ANCHORS_ALPHA.",
            ["rubric", "test"], registry=r)
        self.yes_ratio = Gauge(
            "convmon_anchor_yes_ratio", "Share of the anchors the judge answered yes on, in the baseline run and "
            "the latest run.", ["rubric", "run"], registry=r)
        self.human_agreement = Gauge(
            "convmon_anchor_human_agreement_ratio", "Share of the labelled anchors where the judge agrees with the "
            "human label, in the baseline run and the latest run.", ["rubric", "run"], registry=r)
        self.runs = Counter(
            "convmon_anchor_runs", "Re-judging runs of the anchor set, by what started them and how they ended "
            "(incomplete: the judge budget or the judge stopped it).", ["reason", "outcome"], registry=r)
        self.calls = Counter(
            "convmon_anchor_judge_calls", "Conversations of the anchor set sent to the judge.", registry=r)
        self.last_run = Gauge(
            "convmon_anchor_last_run_timestamp_seconds",
            "When the latest anchor run finished, Unix time (after a restart, until this process runs one: when the "
            "latest stored run started).",
            registry=r)
        self.provenance_changed = Gauge(
            "convmon_anchor_provenance_changed_timestamp_seconds",
            "When the judge's provenance (model as reported, prompt hash, rubric version) last changed, Unix time; "
            "0 until it does.", registry=r)
        for reason in RUN_REASONS:
            for outcome in RUN_OUTCOMES:
                self.runs.labels(reason, outcome)
