"""The USS accuracy section of ``docs/benchmarks.md``: ``use.json`` (every default model, with the learning
curve) and ``use-turns.json`` (the turn-supervised models at 5 % only, a run of their own because the curve
up to 80 % training would multiply their turn examples 16-fold) in one table, paired comparisons of the turn
models on the same splits, and the targets judged on every row, with the split spread beside the
margin so a mean that clears a bar by less than a split std is not read as a win."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from bench.doc_markdown import _md, fmt
from bench.doc_use_dsat import dsat_markdown
from bench.doc_use_overall import overall_markdown

# bench.use.TURN_MODELS, at 5 % only: the learning curve would multiply their turn examples
TURNS_COMMAND = ("convmon bench use --models hashing+turns,hashing+minilm+turns --curve '' --no-dsat --json "
                 "--out var/bench/use-turns.json")

BASELINES = ("majority", "stratified")
SERVED = "hashing"  # Settings.featurizer's default: the model a worker serves
BARS = {"MWOZ": (52.5, 59.0), "SGD": (66.3, 72.6)}  # SPUR Table 1 at 5 %: (ASAP, SPUR)
TURNS_MISSING = ("Turn-supervised rows (`hashing+turns`, `hashing+minilm+turns`): not in these results "
                 "(no `var/bench/use-turns.json`); `make bench` (`convmon bench report --run`) measures them.")


def use_markdown(result: dict[str, Any], turns: dict[str, Any] | None = None) -> str:
    """The section from ``use.json``'s result and, when saved, ``use-turns.json``'s."""
    rows = [r for r in result["results"] if r.get("protocol") == "table1"]
    turn_rows = [r for r in (turns or {}).get("results", []) if r.get("protocol") == "table1"]
    turn_ids = {id(t) for t in turn_rows}
    ordered = [r for d in dict.fromkeys(r["dataset"] for r in rows + turn_rows)
               for r in [*(r for r in rows if r["dataset"] == d), *(t for t in turn_rows if t["dataset"] == d)]]
    body = [[r["dataset"], r["model"], fmt(r["precision"]), fmt(r["recall"]),
             f"{fmt(r['weighted_f1'])} ± {fmt(r.get('weighted_f1_std'))}",
             "baseline (measured)" if r["model"] in BASELINES
             else "measured (`use-turns.json`, 5 % only)" if id(r) in turn_ids else "measured"] for r in ordered]
    body += [[p["dataset"], p["model"], "-", "-", fmt(p["weighted_f1"]), "**paper** (SPUR Table 1)"]
             for p in result.get("paper", [])]
    n_splits = ", ".join(str(s) for s in dict.fromkeys(r.get("splits") for r in rows)) or "5"
    out = [f"Train 5 %, test 80 %, {n_splits} random splits, weighted precision / recall / F1 in percent (mean ± "
           "std over splits). Baselines (`majority`, `stratified`) run on the same splits and read no text. Paper "
           "rows are SPUR's published numbers, copied, not rerun (the paper has no CCPE row).", "",
           _md(["dataset", "model", "precision", "recall", "weighted F1", "source"], body)]
    curve = [r for r in result["results"] if r.get("protocol") == "curve"]
    if not curve:
        out += ["", "Learning curve: not in these results (`--full`, or `--curve 0.05,0.1,0.2,0.4,0.8`, measures it)."]
    if curve:
        fractions = sorted({r["train_fraction"] for r in curve})
        grid: dict[tuple[str, str], dict[float, float]] = defaultdict(dict)
        for r in curve:
            grid[(r["dataset"], r["model"])][r["train_fraction"]] = r["weighted_f1"]
        out += ["", "Learning curve: weighted F1 (%) on a fixed 20 % test set per split, training on a growing "
                "share of the other 80 %.", "",
                _md(["dataset", "model", *[f"{int(f * 100)} %" for f in fractions]],
                    [[d, m, *[fmt(v.get(f)) for f in fractions]] for (d, m), v in grid.items()])]
    out += ["", turns_text(rows, turn_rows) if turns is not None else TURNS_MISSING]
    out += use_checks(rows + turn_rows)
    out += dsat_markdown(result)
    out += overall_markdown(result)
    from bench.use import MODEL_NOTES  # notes added since the results were saved, for names they use

    everything = result["results"] + (turns or {}).get("results", [])
    used = {"other", *(part for r in everything for part in [r["model"], *r["model"].split("+")])}
    saved = {**result.get("models", {}), **{k: v for k, v in (turns or {}).get("models", {}).items() if k in used}}
    models = {**{k: v for k, v in MODEL_NOTES.items() if k in used}, **saved}
    if models:
        out += ["", *[f"- `{k}`: {v}" for k, v in models.items()]]
    return "\n".join(out)


def paired(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, float, int, list[float]] | None:
    """Mean and std of ``a - b`` over the splits both were scored on, wins of ``a``, and the differences.

    None unless both rows kept per-split scores of the same splits (same dataset size, split count and
    fractions: ``bench use`` draws the splits from the seed, 0 in ``make bench``)."""
    sa, sb = a.get("weighted_f1_per_split"), b.get("weighted_f1_per_split")
    same = all(a.get(k) == b.get(k) for k in ("dataset", "n", "splits", "train_fraction", "test_fraction"))
    if not sa or not sb or len(sa) != len(sb) or not same:
        return None
    diffs = [x - y for x, y in zip(sa, sb, strict=True)]
    mean = sum(diffs) / len(diffs)
    std = (sum((d - mean) ** 2 for d in diffs) / len(diffs)) ** 0.5
    return mean, std, sum(d > 0 for d in diffs), diffs


def turns_text(rows: list[dict[str, Any]], turn_rows: list[dict[str, Any]]) -> str:
    """How the turn rows were measured and how each compares, split by split, with its reference models."""
    by_key = {(r["dataset"], r["model"]): r for r in rows + turn_rows}
    parts = []
    for t in turn_rows:
        for ref in [m for m in dict.fromkeys([t["model"].removesuffix("+turns"), "hashing+turns"]) if m != t["model"]]:
            other = by_key.get((t["dataset"], ref))
            if other is None:
                continue
            pair = paired(t, other)
            if pair is None:
                parts.append(f"{t['dataset']} `{t['model']}` against `{ref}`: not paired (no per-split scores of "
                             f"the same splits), means {fmt(t['weighted_f1'])} / {fmt(other['weighted_f1'])}")
                continue
            mean, std, wins, diffs = pair
            parts.append(f"{t['dataset']} `{t['model']}` against `{ref}` {mean:+.1f} ± {std:.1f} (per split "
                         + ", ".join(f"{d:+.1f}" for d in diffs) + f": better on {wins} of {len(diffs)})")
    chose = [f"{t['dataset']} `{t['model']}` {sum(s.get('source') != 'conversations' for s in t['selected'])} "
             f"of {len(t['selected'])}" for t in turn_rows if t.get("selected")]
    text = ("Turn-supervised rows: `" + TURNS_COMMAND + "`, at 5 % only (the learning curve up to 80 % "
            "training would multiply their turn examples 16-fold); `make bench` draws their splits from the same "
            "seed as the rows above.")
    if not turn_rows:
        return text + " That file holds no table-1 rows."
    if parts:
        text += (" Paired on the same splits (mean ± std over splits of the difference, std as in the table): "
                 + "; ".join(parts) + ".")
    if chose:
        text += (" Splits where grouped CV chose turn examples (alone or beside the conversation labels): "
                 + ", ".join(chose) + ".")
    return text


def _bar(name: str, value: float, mean: float, std: float | None) -> str:
    margin = mean - value
    verdict = f"{name} {value}: {'met' if margin >= 0 else 'not met'}, {margin:+.1f}"
    if std is not None and abs(margin) < std:
        verdict += f", within one split std ({fmt(std)}): not distinguishable"
    return verdict


def use_checks(rows: list[dict[str, Any]]) -> list[str]:
    """The targets (ASAP, SPUR) on the served featurizer's row, and the featurizer checks."""
    f1 = {(r["dataset"], r["model"]): r["weighted_f1"] for r in rows}
    out = []
    lines = []
    for dataset, (asap, spur) in BARS.items():
        served = next((r for r in rows if r["dataset"] == dataset and r["model"] == SERVED), None)
        if served is not None:
            std = served.get("weighted_f1_std")
            lines.append(f"{dataset} `{SERVED}` {fmt(served['weighted_f1'])} ± {fmt(std)} ("
                         + _bar("ASAP", asap, served["weighted_f1"], std) + "; "
                         + _bar("SPUR", spur, served["weighted_f1"], std) + ")")
    if lines:
        out += ["", f"Targets at 5 %, judged on the served featurizer's row (`{SERVED}`, named before any "
                "test split is scored; the best of the rows above on the same test splits would be a selection "
                "effect): " + "; ".join(lines) + "."]
    pairs = [(d, f1[(d, "hashing@char3-5")], f1[(d, "hashing")]) for d in dict.fromkeys(r["dataset"] for r in rows)
             if (d, "hashing@char3-5") in f1 and (d, "hashing") in f1]
    if pairs:
        worst = max(before - after for _, before, after in pairs)
        out += ["", "Hashing char n-grams, weighted F1 before (char_wb 3-5-grams, `hashing@char3-5`) / "
                "after (4-grams, `hashing`): " + ", ".join(f"{d} {fmt(b)} / {fmt(a)}" for d, b, a in pairs)
                + f"; largest loss {fmt(worst)} points (bar: <= 0.5)."]
    minilm = [(d, m, f1[(d, f"{m}@torch")], f1[(d, m)]) for d in dict.fromkeys(r["dataset"] for r in rows)
              for m in ("minilm", "hashing+minilm") if (d, f"{m}@torch") in f1 and (d, m) in f1]
    if minilm:
        worst = max(before - after for _, _, before, after in minilm)
        out += ["", "MiniLM as int8 ONNX, weighted F1 fp32 torch (`…@torch`) / int8 ONNX: "
                + ", ".join(f"{d} `{m}` {fmt(b)} / {fmt(a)}" for d, m, b, a in minilm)
                + f"; largest loss {fmt(worst)} points (bar: <= 1; "
                + ("met" if worst <= 1 else "not met: keep CONVMON_EMBEDDING_BACKEND=torch") + ")."]
    return out
