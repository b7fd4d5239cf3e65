"""The OVERALL protocol's part of the USS section (``use.json``'s ``overall``): whole-conversation ROC-AUC and
rate error of each candidate recipe and of the one nested cross-validation selects, per label and data set,
the bars judged on the ``selected`` row of ``overall<3``, and each label's half-panel agreement."""

from __future__ import annotations

from typing import Any

from bench.doc_markdown import _md, fmt

SETS = ("MWOZ", "SGD", "pooled", "CCPE")


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    return f"{fmt(row['roc_auc'], 3)} ± {fmt(row['roc_auc_std'], 3)} ({fmt(row['rate_error'], 2)})"


def _verdicts(rows: list[dict[str, Any]], bars: dict[str, float]) -> list[str]:
    selected = {r["dataset"]: r for r in rows if r["label"] == "overall<3" and r["model"] == "selected"}
    out = []
    for name, bar in ((n, bars[n]) for n in ("MWOZ", "SGD", "pooled") if n in bars and n in selected):
        auc, sd = selected[name]["roc_auc"], selected[name]["roc_auc_std"]
        close = f", within one split sd ({sd:.3f}): not distinguishable" if abs(auc - bar) < sd else ""
        out.append(f"{name} {fmt(auc, 3)} ≥ {bar}: {'met' if auc >= bar else 'not met'} ({auc - bar:+.3f}{close})")
    for name in ("MWOZ", "SGD"):
        if name in selected:
            error = selected[name]["rate_error"]
            out.append(f"{name} rate error {fmt(error, 2)} ≤ {bars.get('rate_error', 2.0)} points: "
                       f"{'met' if error <= bars.get('rate_error', 2.0) else 'not met'}")
    if "CCPE" in selected:
        auc = selected["CCPE"]["roc_auc"]
        out.append(f"CCPE (out of domain) {fmt(auc, 3)}, target 0.62: {'met' if auc >= 0.62 else 'not met'}")
    return out


def overall_markdown(result: dict[str, Any]) -> list[str]:
    overall = result.get("overall")
    if not overall:
        return ["", "OVERALL protocol (whole conversations, dialogue-level rating): not in these results (`convmon "
                "bench use` with MWOZ and SGD among `--datasets` measures it)."]
    rows = overall["rows"]
    labels = list(dict.fromkeys(r["label"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    index = {(r["label"], r["model"], r["dataset"]): r for r in rows}
    body = []
    for label in labels:
        for model in models:
            if not any((label, model, s) in index for s in SETS):
                continue  # a recipe this label was not run with
            chosen = index.get((label, model, "MWOZ"), {}).get("chosen")
            picks = ", ".join(f"{k} {v}/{sum(chosen.values())}" for k, v in chosen.items()) if chosen else "-"
            body.append([label, model, *[_cell(index.get((label, model, s))) for s in SETS],
                         fmt(index.get((label, model, "MWOZ"), {}).get("cv_auc"), 3), picks])
    first = rows[0] if rows else {"splits": "-", "test_fraction": 0.25}
    shares = overall.get("shares", {})
    out = ["", "### OVERALL protocol: whole-conversation satisfaction on the dialogue-level rating", "",
           "Every USS dialogue ends with each annotator's 1-5 OVERALL rating of the whole conversation. Labels, on "
           "whole conversations (what a worker receives): "
           + "; ".join(f"`{k}`: {v} (share {', '.join(f'{n} {p:.0%}' for n, p in shares.get(k, {}).items())})"
                       for k, v in overall.get("labels", {}).items()) + ". "
           f"One model per recipe trained on {' + '.join(overall['train_sets'])} together, exactly as `convmon distill "
           f"train --featurizer <recipe>` trains an item; {first['splits']} held-out splits (seeds "
           f"{', '.join(str(s) for s in overall.get('seeds', []))}, fixed in advance) each holding out "
           f"{first['test_fraction']:.0%} of every training data set; {', '.join(overall['out_of_domain']) or '-'} "
           "is out of domain (never trained on, never used to choose). Cells: held-out ROC-AUC mean ± sd over "
           "splits (rate error: |mean predicted probability − true share|, points, mean over splits). `selected`: per "
           "split, the recipe with the highest cross-validated ROC-AUC on that split's training rows (nested CV: the "
           "held-out rows never choose); `@w`: the lexicon columns weighted w (default 3). CV AUC: on the training "
           "rows, mean over splits. Alone: `convmon bench use --models majority --no-dsat --json --out "
           "var/bench/use-overall.json` (`overall` in the JSON; about 7 CPU minutes).", "",
           _md(["label", "recipe", *[f"{s} (out of domain)" if s == "CCPE" else s for s in SETS], "CV AUC",
                "chosen"], body)]
    chosen_all = overall.get("chosen_on_all_training", {})
    if chosen_all:
        out += ["", "Chosen by CV on all of " + " + ".join(overall["train_sets"]) + " (the recipe to serve): "
                + "; ".join(f"`{label}`: `{c['recipe']}` (CV AUC "
                            + ", ".join(f"{r} {v:.3f}" for r, v in c["cv_auc"].items()) + ")"
                            for label, c in chosen_all.items()) + "."]
    verdicts = _verdicts(rows, overall.get("bars", {}))
    if verdicts:
        out += ["", "Bars (`overall<3`, `selected` row): " + "; ".join(verdicts) + "."]
    cpu = overall.get("score_cpu_ms_per_conversation", {})
    featurize = overall.get("featurize_cpu_ms_per_conversation", {})
    if cpu:
        out += ["", "CPU per conversation (in process, featurize and score held-out conversations, best of 3): "
                + ", ".join(f"`{r}` {v:.2f} ms" for r, v in cpu.items()) + "; featurizing alone: "
                + ", ".join(f"`{r}` {v:.2f} ms" for r, v in featurize.items()) + "."]
    agreement = overall.get("panel_agreement", [])
    if agreement:
        grid = {(a["label"], a["dataset"]): a for a in agreement}
        names = list(dict.fromkeys(a["dataset"] for a in agreement))
        out += ["", "Half-panel agreement of each label: each dialogue's annotators split at random into two halves; "
                "one half's graded rating (mean OVERALL; for `spur`, how far its first non-neutral turn lies below "
                "neutral) ranks the other half's label, ROC-AUC mean [range] over 20 splits.", "",
                _md(["label", *names], [[label, *[f"{fmt(grid[(label, n)]['roc_auc'], 3)} "
                                                  f"[{fmt(grid[(label, n)]['roc_auc_min'], 3)}-"
                                                  f"{fmt(grid[(label, n)]['roc_auc_max'], 3)}]"
                                                  if (label, n) in grid else "-" for n in names]]
                                         for label in dict.fromkeys(a["label"] for a in agreement)])]
    return out
