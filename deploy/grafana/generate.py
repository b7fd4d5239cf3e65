"""Generate convmon's Grafana dashboards (``dashboards/*.json``) from one readable source.

Run ``python deploy/grafana/generate.py`` after editing; ``tests/deploy/test_grafana_queries.py``
fails when the JSON and this file disagree, and when a query names a metric that neither
``monitor.contracts.metrics.Metrics`` exports nor a recording rule in ``deploy/prometheus/rules`` defines.
Queries prefer recording rules: they already sum over workers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
PG = {"type": "grafana-postgresql-datasource", "uid": "convmon-label-store"}  # provisioning/datasources
DRILL_DOWN_TITLE = "Latest conversations with this item (score sink)"
# The drill-down table: rows the score sink writes (CONVMON_SCORE_STORE=true, distill/score_store.py) into
# the label store's PostgreSQL. Grafana expands $__unixEpochFilter to the dashboard's time range.
DRILL_DOWN_SQL = """SELECT to_timestamp(scored_at) AS "scored at", conversation_id, scorer, value, r AS "R",
       model_version, trace_id, response_id
FROM convmon_score_items
WHERE item_id = '$rubric' AND $__unixEpochFilter(scored_at)
ORDER BY scored_at DESC
LIMIT 50"""


class Board:
    """Lays panels out left to right in rows of 24 grid units."""

    def __init__(self, uid: str, title: str, description: str, variables: list[dict[str, Any]]) -> None:
        self.uid, self.title, self.description, self.variables = uid, title, description, variables
        self.panels: list[dict[str, Any]] = []
        self.annotations: list[dict[str, Any]] = []
        self._x = self._y = self._row_h = 0

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append({"type": "row", "title": title, "collapsed": False, "id": len(self.panels) + 1,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self._y}, "panels": []})
        self._y += 1

    def _newline(self) -> None:
        if self._x:
            self._x, self._y, self._row_h = 0, self._y + self._row_h, 0

    def panel(self, kind: str, title: str, targets: list[tuple[str, str]], *, w: int = 12, h: int = 8,
              unit: str = "short", description: str = "", links: list[dict[str, str]] | None = None,
              exemplar: bool = False, **options: Any) -> None:
        if self._x + w > 24:
            self._newline()
        panel: dict[str, Any] = {
            "id": len(self.panels) + 1, "type": kind, "title": title, "description": description,
            "datasource": DS, "gridPos": {"h": h, "w": w, "x": self._x, "y": self._y},
            "targets": [
                {"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend,
                 **({"format": "heatmap"} if kind == "heatmap" else {}), **({"exemplar": True} if exemplar else {})}
                for i, (expr, legend) in enumerate(targets)
            ],
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": options,
            **({"links": links} if links else {}),
        }
        self.panels.append(panel)
        self._x += w
        self._row_h = max(self._row_h, h)

    def sql_table(self, title: str, sql: str, *, w: int = 24, h: int = 10, description: str = "") -> int:
        """A PostgreSQL table panel; returns its id (for links)."""
        self._newline()
        panel_id = len(self.panels) + 1
        self.panels.append({
            "id": panel_id, "type": "table", "title": title, "description": description, "datasource": PG,
            "gridPos": {"h": h, "w": w, "x": 0, "y": self._y},
            "targets": [{"refId": "A", "datasource": PG, "format": "table", "rawQuery": True, "editorMode": "code",
                         "rawSql": sql}],
            "fieldConfig": {"defaults": {}, "overrides": []}, "options": {"showHeader": True},
        })
        self._y += h
        return panel_id

    def json(self) -> dict[str, Any]:
        return {
            "uid": self.uid, "title": self.title, "description": self.description, "tags": ["convmon"],
            "schemaVersion": 39, "version": 1, "editable": True, "refresh": "30s", "timezone": "browser",
            "time": {"from": "now-6h", "to": "now"},
            "links": [{"type": "dashboards", "tags": ["convmon"], "title": "convmon", "asDropdown": True}],
            "templating": {"list": [DATASOURCE_VAR, *self.variables]}, "annotations": {"list": self.annotations},
            "panels": self.panels,
        }


DATASOURCE_VAR = {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus",
                  "current": {}, "hide": 0}


def query_var(name: str, query: str, *, multi: bool, label: str, regex: str = "") -> dict[str, Any]:
    return {"name": name, "label": label, "type": "query", "datasource": DS, "refresh": 2, "sort": 1,
            "query": {"query": query, "refId": name}, "definition": query, "regex": regex,
            "multi": multi, "includeAll": multi, "current": {}, "hide": 0}


SCORER = query_var("scorer", "label_values(rubric:convmon_rubric_yes:ratio_rate5m, scorer)", multi=False,
                   label="Scorer")
RUBRICS = query_var("rubric", "label_values(rubric:convmon_rubric_yes:ratio_rate5m, rubric)", multi=True,
                    label="Rubric items")
ONE_RUBRIC = query_var("rubric", "label_values(rubric:convmon_rubric_yes:ratio_rate5m, rubric)", multi=False,
                       label="Rubric item")
# Where `convmon ui` is reached (CONVMON_UI_URL): panel links open its flagged conversations for the item and the
# dashboard's time range (Grafana's from/to in milliseconds).
REVIEW_URL = {"name": "review_url", "label": "Review page (convmon ui)", "type": "textbox",
              "query": "http://127.0.0.1:8050", "current": {"text": "http://127.0.0.1:8050",
                                                            "value": "http://127.0.0.1:8050"}, "hide": 0}
REVIEW_LINK = {"title": "Flagged conversations and the judge's reasons (convmon ui)", "targetBlank": True,
               "url": "${review_url}/flagged?item=${rubric}&from=${__from}&to=${__to}"}
TS = "timeseries"


def judge_drift_annotations(rubric: str) -> list[dict[str, Any]]:
    """Marks on every time-series panel: where the anchors say the judge drifted, and where its provenance changed,
    so a moved rate reads as the judge's or the product's (``convmon anchors run``, docs/judge-drift.md)."""
    return [
        {"name": "Judge drift (anchors)", "datasource": DS, "enable": True, "iconColor": "orange", "step": "1h",
         "expr": f"max by (rubric) (rubric:convmon_judge_drift:max{rubric}) > 0",
         "titleFormat": "Judge drift on {{rubric}}",
         "textFormat": "The judge's human-labelled anchors moved: a rate change here is the judge's, not the "
                       "product's"},
        {"name": "Judge provenance changed", "datasource": DS, "enable": True, "iconColor": "purple", "step": "5m",
         "expr": "changes(convmon_anchor_provenance_changed_timestamp_seconds[10m]) > 0",
         "titleFormat": "Judge provenance changed",
         "textFormat": "Model as reported, prompt hash or rubric version changed: the anchors are re-judged"},
    ]


def overview() -> Board:
    b = Board("convmon-overview", "convmon / Overview",
              "User satisfaction per rubric item, judge vs distilled, R distribution and volume.", [SCORER, RUBRICS])
    b.annotations = judge_drift_annotations("")
    b.panel("stat", "Conversations scored / min", [("sum(scorer:convmon_conversations_scored:rate5m) * 60", "")],
            w=6, h=4)
    b.panel("stat", "Mean R", [('scorer:convmon_satisfaction_r:mean_rate5m{scorer="$scorer"}', "")], w=6, h=4,
            description="SPUR aggregate R = sum(SAT scores) - sum(DSAT scores), mean over 5 minutes.")
    b.panel("stat", "Expected satisfied share (judge, 1h)", [
        ('scorer:convmon_satisfaction_expected:ratio_rate1h{scorer="llm"}', "satisfied"),
        ('scorer:convmon_satisfaction_calibrated:ratio_rate1h{scorer="llm"}', "calibrated"),
    ], w=6, h=4, unit="percentunit",
        description="Mean calibrated P(satisfied) of the judge-scored conversations that carried one (LLM-Rubric "
                    "calibration against user feedback), and the share of judge scores that did.")
    b.panel("stat", "Firing alerts", [('count(ALERTS{alertname=~"Convmon.*", alertstate="firing"}) or vector(0)', "")],
            w=6, h=4)
    b.row("Rates per rubric item")
    b.panel(TS, "SAT rates", [('rubric:convmon_rubric_yes:ratio_rate5m{polarity="sat", scorer="$scorer", '
                               'rubric=~"$rubric"}', "{{rubric}}")], unit="percentunit")
    b.panel(TS, "DSAT rates", [('rubric:convmon_rubric_yes:ratio_rate5m{polarity="dsat", scorer="$scorer", '
                                'rubric=~"$rubric"}', "{{rubric}}")], unit="percentunit")
    b.panel(TS, "Judge vs distilled (30m)", [
        ('rubric:convmon_rubric_yes:ratio_rate30m{scorer="llm", rubric=~"$rubric"}', "judge {{rubric}}"),
        ('rubric:convmon_rubric_yes:ratio_rate30m{scorer="distilled", rubric=~"$rubric"}', "distilled {{rubric}}"),
    ], unit="percentunit", description="The judge sees a sample, the distilled models every conversation.")
    b.panel(TS, "DSAT rates, corrected (30m)", [
        ('rubric:convmon_rubric_corrected:ratio_rate30m{polarity="dsat", rubric=~"$rubric"}', "{{rubric}}")],
        unit="percentunit", description=(
            "The distilled model's mean over every conversation, corrected by the judged slice's residuals "
            "(prediction-powered; docs/metrics.md): unbiased whatever the model, tighter than the judged slice "
            "alone where the model discriminates. Empty while no distilled model is live."))
    b.panel("bargauge", "DSAT rate now vs 7-day baseline", [
        ('rubric:convmon_rubric_yes:ratio_rate30m{polarity="dsat", scorer="$scorer"}'
         ' - rubric:convmon_rubric_yes:ratio_avg7d{polarity="dsat", scorer="$scorer"}', "{{rubric}}"),
    ], unit="percentunit", displayMode="gradient", orientation="horizontal")
    b.row("Distribution and volume")
    b.panel("heatmap", "R distribution", [
        ('sum by (le) (scorer_le:convmon_satisfaction_r_bucket:rate5m{scorer="$scorer"})', "{{le}}")])
    b.panel(TS, "Volume", [
        ("kind:convmon_events:rate5m", "events {{kind}}"),
        ("scorer:convmon_conversations_scored:rate5m", "scored {{scorer}}"),
        ("route:convmon_conversations_routed:rate5m", "routed {{route}}"),
    ], unit="reqps")
    b.panel(TS, "Scored by app", [("sum by (app) (rate(convmon_conversations_scored_total[5m]))", "{{app}}")],
            unit="reqps", description="Metadata dimensions are capped per worker; overflow shows as 'other'.")
    b.panel(TS, "Expected vs counted DSAT rate", [
        ('rubric:convmon_rubric_expected:ratio_rate5m{polarity="dsat", scorer="$scorer", rubric=~"$rubric"}',
         "expected {{rubric}}"),
        ('rubric:convmon_rubric_yes:ratio_rate5m{polarity="dsat", scorer="$scorer", rubric=~"$rubric"}',
         "counted {{rubric}}"),
    ], unit="percentunit", description="Mean probability vs share over 0.5: a gap means miscalibration.")
    return b


def item_detail() -> Board:
    b = Board("convmon-item", "convmon / Item detail",
              "One rubric item: rate vs baseline, judge/distilled agreement, drift and calibration.",
              [ONE_RUBRIC, REVIEW_URL])
    r = 'rubric="$rubric"'
    b.annotations = judge_drift_annotations(f"{{{r}}}")
    drill_down = [{"title": "Latest conversations with this item",
                   "url": "/d/convmon-item/?var-rubric=${rubric}&${__url_time_range}&viewPanel=1"}, REVIEW_LINK]
    b.sql_table(DRILL_DOWN_TITLE, DRILL_DOWN_SQL, description=(
        "The newest conversations this item said yes for, from the score sink's table in the label store "
        "(PostgreSQL; CONVMON_SCORE_STORE=true). trace_id opens the judged call in your tracing backend."))
    b.panel(TS, "Rate vs 7-day baseline", [
        (f"rubric:convmon_rubric_yes:ratio_rate30m{{{r}}}", "30m {{scorer}}"),
        (f"rubric:convmon_rubric_yes:ratio_avg7d{{{r}}}", "7d baseline {{scorer}}"),
    ], unit="percentunit", links=drill_down)
    b.panel(TS, "Yes verdicts / s (exemplars: example conversations)", [
        (f'sum by (scorer) (rate(convmon_rubric_verdicts_total{{{r}, verdict="yes"}}[$__rate_interval]))',
         "{{scorer}}")], links=drill_down, exemplar=True, description=(
        "Each exemplar dot carries the conversation_ref (an opaque reference: convmon inspect and forget resolve "
        "it) and trace_id of a recent yes verdict; the panel link opens the table of the latest ones."))
    b.panel(TS, "Corrected rate (30m) with its 95 % interval", [
        (f"rubric:convmon_rubric_corrected:ratio_rate30m{{{r}}}", "corrected"),
        (f"rubric:convmon_rubric_corrected:ratio_rate30m{{{r}}} - 1.96 * "
         f"rubric:convmon_rubric_corrected:stderr_rate30m{{{r}}}", "lower 95 %"),
        (f"rubric:convmon_rubric_corrected:ratio_rate30m{{{r}}} + 1.96 * "
         f"rubric:convmon_rubric_corrected:stderr_rate30m{{{r}}}", "upper 95 %"),
        (f"rubric:convmon_rubric_corrected:ratio_baseline7d{{{r}}}", "corrected 7d baseline"),
        (f'rubric:convmon_rubric_yes:ratio_rate30m{{{r}, scorer="llm"}}', "judged slice alone"),
    ], unit="percentunit", description=(
        "The distilled mean corrected by the judged slice's residuals y - f weighted by 1/pi, with the standard "
        "error ConvmonDsatSpikeCorrected tests against the baseline (docs/metrics.md, Corrected rates)."))
    b.panel(TS, "Calibration: mean distilled probability vs judge rate", [
        (f'rubric:convmon_rubric_expected:ratio_rate5m{{{r}, scorer="distilled"}}', "distilled expected"),
        (f'rubric:convmon_rubric_yes:ratio_rate5m{{{r}, scorer="llm"}}', "judge yes rate"),
        (f'rubric:convmon_rubric_expected_weighted:ratio_rate1h{{{r}, scorer="llm"}}', "judge, reweighted (1h)"),
    ], unit="percentunit")
    b.row("Agreement on the shadow slice")
    b.panel(TS, "Agreement", [
        (f"rubric:convmon_agreement_accuracy:ratio_rate1h{{{r}}}", "accuracy (1h, all workers)"),
        (f"avg(convmon_agreement_auc{{{r}}})", "AUC (window, mean of workers)"),
    ], unit="percentunit")
    b.panel("table", "Shadow pairs, last hour", [
        (f"sum by (judge, distilled) (rubric_pair:convmon_agreement_pairs:increase1h{{{r}}})", "")])
    b.panel(TS, "Pairs in agreement windows", [(f"convmon_agreement_window_size{{{r}}}", "{{instance}}")])
    b.row("Judge drift: the re-judged anchor set")
    b.panel(TS, "Anchors: judge yes share", [
        (f'max(convmon_anchor_yes_ratio{{{r}, run="baseline"}})', "baseline run"),
        (f'max(convmon_anchor_yes_ratio{{{r}, run="latest"}})', "latest run"),
    ], w=8, unit="percentunit", description=(
        "The same human-labelled conversations, re-judged once a day and on every judge change: a gap between "
        "the runs is the judge's doing, whatever the live traffic does."))
    b.panel(TS, "Anchors: agreement with the human labels", [
        (f'max(convmon_anchor_human_agreement_ratio{{{r}, run="baseline"}})', "baseline run"),
        (f'max(convmon_anchor_human_agreement_ratio{{{r}, run="latest"}})', "latest run"),
    ], w=8, unit="percentunit")
    b.panel(TS, "Anchors: e-values (drift at 2 x items / alpha)", [
        (f"max by (test) (convmon_judge_drift_evalue{{{r}}})", "{{test}}"),
        (f"max(rubric:convmon_judge_drift:max{{{r}}})", "drift flag"),
    ], w=8, description=(
        "Anytime-valid e-processes: verdicts against the baseline runs, and against the human labels; "
        "ConvmonJudgeDrift fires when either reaches 2 x (rubric items) / CONVMON_ANCHORS_ALPHA."))
    b.row("Drift")
    b.panel(TS, "PSI and JSD vs reference", [
        (f"max(convmon_drift_psi{{{r}}})", "PSI"),
        (f"max(convmon_drift_jsd{{{r}}})", "JSD (bits)"),
    ], description="PSI > 0.25 is a significant shift; NaN while the first-N reference fills.")
    b.panel(TS, "Change-point statistics", [
        (f"max by (detector, scorer) (convmon_drift_statistic{{{r}}})", "{{detector}} {{scorer}}")],
        description="Page-Hinkley alarms at 10, CUSUM at 10 (standard errors of a 50-conversation batch).")
    b.panel(TS, "Drift flags", [(f"max by (detector, scorer) (convmon_drift_detected{{{r}}})",
                                 "{{detector}} {{scorer}}")])
    b.panel(TS, "Detections / hour", [
        (f"sum by (detector, scorer) (increase(convmon_drift_detections_total{{{r}}}[1h]))",
         "{{detector}} {{scorer}}")])
    b.panel(TS, "Reference size", [(f"convmon_drift_reference_size{{{r}}}", "{{instance}}")], w=8)
    b.panel(TS, "Feature drift (domain classifier AUC)",
            [("max by (source) (convmon_feature_drift_auc)", "{{source}}")], w=8)
    b.panel("table", "Live model", [("convmon_model_info", ""),
                                    ("time() - max(convmon_model_last_trained_timestamp_seconds > 0)", "age"),
                                    ("convmon_calibration_info", "calibration")],
            w=8)
    return b


def operations() -> Board:
    b = Board("convmon-operations", "convmon / Operations",
              "Consumer lag, judge latency, tokens and spend, dead letters, workers.", [])
    b.panel("stat", "Workers up", [('sum(up{job="convmon"})', "")], w=6, h=4)
    b.panel("stat", "Judge spend today (USD)", [("sum(model:convmon_judge_spend_usd:increase1d)", "")], w=6, h=4,
            unit="currencyUSD")
    b.panel("stat", "Judge budget left (USD)", [("min(convmon_judge_budget_remaining_usd)", "")], w=6, h=4,
            unit="currencyUSD")
    b.panel("stat", "Budget exhausted", [("max(convmon_judge_budget_exhausted)", "")], w=6, h=4)
    b.row("Kafka")
    b.panel(TS, "Consumer lag", [("topic:convmon_consumer_lag_messages:sum", "{{topic}}")])
    b.panel(TS, "Partitions owned per worker", [("instance:convmon_partition_owned:count", "{{instance}}")],
            description="Input partitions whose running totals each worker exports: they add up to the "
                        "partition count except during a rebalance.")
    b.panel(TS, "Conversations counted per partition / min", [
        ("sum by (partition) (rate(partition:convmon_partition_conversations_scored_total:max[5m])) * 60",
         "partition {{partition}}")],
        description="From the per-partition running totals (one owner's value per partition): continuous "
                    "across worker crashes and rebalances.")
    b.panel(TS, "Consumer lag per worker", [("convmon_consumer_lag_messages", "{{instance}} {{topic}}")])
    b.panel(TS, "Delivery failures", [
        ("sum by (topic) (increase(convmon_delivery_failures_total[5m]))", "{{topic}}"),
        ("max by (instance) (convmon_offset_commits_blocked)", "commits blocked {{instance}}"),
    ], description="Records the broker did not acknowledge: the worker stops committing and exits, its successor "
                   "re-reads from the last commit.")
    b.row("Judge")
    b.panel(TS, "Judge latency", [
        ("model:convmon_judge_request_duration_seconds:p95_rate5m", "p95 {{model}}"),
        ("histogram_quantile(0.5, sum by (model, le) (rate(convmon_judge_request_duration_seconds_bucket[5m])))",
         "p50 {{model}}"),
    ], unit="s")
    b.panel(TS, "Judge requests by status", [("model_status:convmon_judge_requests:rate5m", "{{model}} {{status}}")],
            unit="reqps")
    b.panel(TS, "Judge error ratio", [("model:convmon_judge_errors:ratio_rate10m", "{{model}}")], unit="percentunit")
    b.panel(TS, "Tokens / min", [("model_kind:convmon_judge_tokens:rate5m * 60", "{{model}} {{kind}}")])
    b.panel(TS, "Spend / hour (USD)",
            [("sum by (model) (rate(convmon_judge_spend_usd_total[5m])) * 3600", "{{model}}")], unit="currencyUSD")
    b.panel(TS, "Retries, repairs, parse failures", [
        ("sum by (cause) (rate(convmon_judge_retries_total[5m]))", "retry {{cause}}"),
        ("sum by (outcome) (rate(convmon_judge_repairs_total[5m]))", "repair {{outcome}}"),
        ("sum(rate(convmon_judge_parse_failures_total[5m]))", "parse failures"),
        ("sum by (rubric) (rate(convmon_jury_disagreements_total[5m]))", "jury disagreement {{rubric}}"),
    ], unit="reqps")
    b.panel(TS, "Judge requests in flight", [("sum(convmon_judge_in_flight)", "in flight")])
    b.row("Distilled path")
    b.panel(TS, "Batch service time", [
        ("histogram_quantile(0.95, sum by (le) (rate(convmon_classify_batch_duration_seconds_bucket[5m])))", "p95"),
        ("sum by (instance) (rate(convmon_classify_batch_duration_seconds_sum[5m])) / "
         "sum by (instance) (rate(convmon_classify_batch_duration_seconds_count[5m]))", "mean {{instance}}"),
    ], unit="s", description="Featurize, predict and build the records of one batch; with MiniLM on CPU "
                             "this is most of a distilled score's latency.")
    b.panel(TS, "Conversations per batch", [
        ("sum by (instance) (rate(convmon_classify_batch_conversations_sum[5m])) / "
         "sum by (instance) (rate(convmon_classify_batch_conversations_count[5m]))", "{{instance}}"),
    ], description="Near CONVMON_CLASSIFY_BATCH (default 256) means that worker's distilled path is saturated "
                   "(check consumer lag on conversations); small batches mean it keeps up.")
    b.row("Data quality")
    b.panel(TS, "Dead letters by reason", [("reason:convmon_dead_letters:rate5m", "{{reason}}")], unit="reqps")
    b.panel(TS, "Unscored, duplicates, late, truncated", [
        ("sum by (reason) (rate(convmon_conversations_unscored_total[5m]))", "unscored {{reason}}"),
        ("sum by (scorer) (rate(convmon_duplicate_scores_total[5m]))", "duplicate {{scorer}}"),
        ("sum by (kind) (rate(convmon_late_events_total[5m]))", "late {{kind}}"),
        ("sum(rate(convmon_conversations_truncated_total[5m]))", "truncated"),
        ("sum by (reason) (rate(convmon_export_skipped_items_total[5m]))", "skipped item {{reason}}"),
        ("sum by (reason) (rate(convmon_satisfaction_uncalibrated_total[5m]))", "uncalibrated {{reason}}"),
    ], unit="reqps")
    b.panel(TS, "Conversations finished", [
        ("sum by (end_reason) (rate(convmon_conversations_finished_total[5m]))", "{{end_reason}}")], unit="reqps")
    b.panel(TS, "Dimension overflow to 'other'", [
        ("sum by (dimension) (rate(convmon_dimension_overflow_total[5m]))", "{{dimension}}")], unit="reqps")
    b.panel(TS, "Label store", [
        ("sum(rate(convmon_label_store_errors_total[5m]))", "write errors / s"),
        ("sum(convmon_label_store_buffered)", "buffered"),
    ])
    return b


BOARDS = {"overview.json": overview, "item-detail.json": item_detail, "operations.json": operations}


def render() -> dict[str, str]:
    return {name: json.dumps(build().json(), indent=2) + "\n" for name, build in BOARDS.items()}


def main() -> int:
    out = HERE / "dashboards"
    out.mkdir(exist_ok=True)
    for name, text in render().items():
        (out / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
