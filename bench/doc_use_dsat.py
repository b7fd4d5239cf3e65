"""The DSAT protocol's part of the USS section (``use.json``'s ``dsat`` rows): ROC-AUC and rate error of the
served recipe and the turn model, on cut and whole conversations, with the target judged on the
row chosen by cross-validation inside each training split (never the best row on the test splits)."""

from __future__ import annotations

from typing import Any

from bench.doc_markdown import _md, fmt

BAR, GOAL = 0.70, 0.75  # whole-conversation ROC-AUC for dissatisfaction, each of MWOZ, SGD, CCPE
RATE_BAR = 2.0  # points of mean absolute rate error
TURN_MODEL = "turn-aggregate"  # bench.use_whole.TURN_MODEL (not imported: rendering needs no sklearn)


def _chosen(row: dict[str, Any]) -> str:
    """What CV chose on the training splits: the model (``selected``) and the turn model's aggregation."""
    chosen = row.get("chosen", [])
    picks = [c.get("model", TURN_MODEL) for c in chosen]
    if row["model"] == "selected":
        aggregations = [c["aggregation"] for c in chosen if c.get("model", TURN_MODEL) == TURN_MODEL]
        parts = [f"{m} {picks.count(m)}/{len(picks)}" for m in dict.fromkeys(picks)]
    else:
        aggregations, parts = [c["aggregation"] for c in chosen if "aggregation" in c], []
    parts += [f"{a} {aggregations.count(a)}" for a in dict.fromkeys(aggregations)]
    return ", ".join(parts) or "-"


def dsat_markdown(result: dict[str, Any]) -> list[str]:
    rows = result.get("dsat") or []
    if not rows:
        return ["", "DSAT protocol (cut and whole conversations): not in these results (`convmon bench use` without "
                "`--no-dsat` measures it)."]
    first = rows[0]
    body = [[r["dataset"], r["input"], r["model"], f"{fmt(r['roc_auc'], 3)} ± {fmt(r['roc_auc_std'], 3)}",
             fmt(r["cv_auc"], 3), f"{fmt(r['rate_error'], 2)} (max {fmt(r['rate_error_max'], 2)})", _chosen(r),
             fmt(r["seconds"] / max(r["splits"], 1), 1), fmt(r.get("score_cpu_ms_per_conversation"), 2)]
            for r in rows]
    out = ["", "### DSAT protocol: the served recipe on cut and whole conversations", "",
           f"Label: {result.get('dsat_label_rule', 'DSAT dialogue label')}. Input `cut`: the conversation cut as in "
           "Table 1 (the paper's input); `whole`: the whole conversation, what a worker receives (same label). "
           f"{first['splits']} random splits holding out {int(100 * first['test_fraction'])} % of the dialogues "
           "(grouped by dialogue); ROC-AUC of P(DSAT) on the held-out dialogues, mean ± std over splits; CV AUC: "
           "the cross-validated AUC on the training split the model was chosen by; rate error: |mean P(DSAT) − "
           "DSAT share| of the held-out dialogues in points, mean (max) over splits (a held-out share itself "
           "varies by about sqrt(p(1-p)/n), 3-4 points on 125-250 dialogues); train CPU s: training and scoring per "
           "split; score CPU: in-process CPU ms per conversation to featurize and score held-out conversations "
           "(best of 3 passes over split 1's).", "",
           _md(["dataset", "input", "model", "ROC-AUC", "CV AUC", "rate error", "chosen", "train CPU s",
                "score CPU ms/conv"], body)]
    verdicts = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        pick = next((r for r in rows if r["dataset"] == dataset and r["input"] == "whole" and r["model"] == "selected"),
                    None) or next((r for r in rows if r["dataset"] == dataset and r["input"] == "whole"
                                   and r["model"] == "served"), None)
        if pick is None:
            continue
        auc, rate = pick["roc_auc"], pick["rate_error"]
        verdicts.append(f"{dataset} `{pick['model']}` {fmt(auc, 3)} ± {fmt(pick['roc_auc_std'], 3)} "
                        f"({'met' if auc >= BAR else 'not met'}, {auc - BAR:+.3f}; rate error {fmt(rate, 2)} points: "
                        f"{'met' if rate <= RATE_BAR else 'not met'})")
    if verdicts:
        out += ["", f"Target (whole conversations, ROC-AUC >= {BAR} on each data set, goal {GOAL}; rate "
                f"error <= {RATE_BAR} points), judged on the `selected` row (the model chosen by CV inside each "
                "training split): " + "; ".join(verdicts) + "."]
    out += _agreement(result.get("dsat_panel_agreement") or [])
    notes = result.get("dsat_models") or {}
    return out + (["", *[f"- `{k}`: {v}" for k, v in notes.items()]] if notes else [])


def _agreement(rows: list[dict[str, Any]]) -> list[str]:
    """How far two panels of the data set's own annotators agree on the label (bench/use_agreement.py)."""
    if not rows:
        return []
    body = [[r["dataset"], str(r["dialogues"]), f"{fmt(r['roc_auc'], 3)} [{fmt(r['roc_auc_min'], 3)}-"
             f"{fmt(r['roc_auc_max'], 3)}]"] for r in rows]
    return ["", "How far the annotators agree on this label: each dialogue's annotators split at random into two "
            "halves, the label computed from each; one half's graded label (how far its mean at its first "
            "non-neutral user turn lies below neutral) ranks the other half's with this ROC-AUC, mean [range] over "
            f"{max(r['splits'] for r in rows)} splits. Humans who read and rated every turn reproduce each other's "
            "label about this well; a half panel is smaller than the full one, so the full label is somewhat more "
            "reliable.", "",
            _md(["dataset", "dialogues", "half panel vs half panel ROC-AUC"], body)]
