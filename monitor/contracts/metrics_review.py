"""What ``convmon ui`` exports on its ``/metrics``: judge-vs-human agreement per rubric item, from the human labels.

One process exports them (the review page), never the workers: every worker would otherwise export the same
estimate. Values are recomputed from the label store on each scrape.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, Info

BOUNDS = ("estimate", "low", "high")  # the point estimate and its 95 % interval


class ReviewMetrics:
    """Agreement, kappa, precision, recall and the human-corrected rate, each with its 95 % interval."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r, labels = registry, ("rubric", "bound")
        self.agreement = Gauge("convmon_judge_human_agreement", "Share of reviewed conversations where the judge's "
                               "verdict on the item equals the reviewer's, weighted by 1/inclusion probability.",
                               labels, registry=r)
        self.kappa = Gauge("convmon_judge_human_kappa", "Cohen's kappa of the judge against reviewers on the item, "
                           "weighted by 1/inclusion probability.", labels, registry=r)
        self.precision = Gauge("convmon_judge_human_precision", "Share of the judge's yes verdicts on the item that "
                               "reviewers confirm, weighted by 1/inclusion probability.", labels, registry=r)
        self.recall = Gauge("convmon_judge_human_recall", "Share of the reviewers' yes answers on the item the judge "
                            "also said yes to, weighted by 1/inclusion probability.", labels, registry=r)
        self.corrected_rate = Gauge(
            "convmon_judge_human_corrected_ratio", "The item's rate over judged conversations corrected by the human "
            "labels (prediction-powered: the judge's rate plus the reviewed mean of human minus judge).",
            labels, registry=r)
        self.labels = Gauge("convmon_judge_human_labels", "Reviewed conversations with a human answer for the item "
                            "in the review window.", ("rubric",), registry=r)
        self.floor = Gauge("convmon_judge_human_agreement_floor", "CONVMON_REVIEW_AGREEMENT_FLOOR: the agreement "
                           "below which ConvmonJudgeHumanDisagreement fires.", registry=r)
        self.min_labels = Gauge("convmon_judge_human_min_labels", "CONVMON_REVIEW_MIN_LABELS: reviewed conversations "
                                "an item needs before the disagreement alert may fire.", registry=r)
        self.page = Info("convmon_review_page", "Where the review page is reached (CONVMON_UI_URL); alert "
                         "annotations build their links from it.", registry=r)
