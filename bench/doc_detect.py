"""``bench detect`` results as a rich table (the terminal) and as its section of ``docs/benchmarks.md``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from bench.doc_markdown import _md, fmt

NAMES = {"judge": "judge slice (Hájek)", "distilled_mean": "distilled mean probability",
         "distilled_verdicts": "distilled verdicts (the rule's expression on scorer=distilled)",
         "ppi": "prediction-powered", "ppi_judged_guard": "prediction-powered, guard on judged count"}


SHORT = {"judge": "judge slice", "distilled_mean": "distilled mean", "distilled_verdicts": "distilled verdicts",
         "ppi": "PPI", "ppi_judged_guard": "PPI with the judged-count guard"}


def _range(s: dict[str, Any], digits: int = 0) -> str:
    if not s.get("n"):
        return "-"
    if s["min"] == s["max"]:
        return fmt(float(s["median"]), digits)
    return f"{fmt(float(s['median']), digits)} [{fmt(float(s['min']), digits)}–{fmt(float(s['max']), digits)}]"


def _cells(row: dict[str, Any], factors: list[str]) -> list[str]:
    cells = [f"{row['rate']:g}", NAMES.get(row["estimator"], row["estimator"])]
    for f in factors:
        got = row[f]
        cells += [f"{got['detected']}/{got['of']}", _range(got["minutes_to_detect"])]
    alarms = f"{_range(row['false_alarms_per_day'], 2)} ({row['false_alarms']} in all)"
    cells += [alarms, _range(row["quiet_mae_points"], 2),
              *[_range(row[f]["spike_mae_points"], 1) for f in factors], _range(row["quiet_coverage95"], 3)]
    return cells


def _headers(factors: list[str]) -> list[str]:
    return ["judge rate", "estimator", *[h for f in factors for h in (f"{f} detected", f"{f} minutes")],
            "false alarms / day", "error, no spike (pts)", *[f"error in {f} spike (pts)" for f in factors],
            "95 % interval coverage"]


def _factors(result: dict[str, Any]) -> list[str]:
    return [f"{f:g}x" for f in result["factors"]]


def detect_table(result: dict[str, Any]) -> Table:
    factors = _factors(result)
    table = Table(title=f"DSAT spike detection, {result['volume_per_hour']:,} conversations / h, baseline share "
                        f"{result['base_share']:g} (median [range] over {len(result['seeds'])} seeds)")
    for col in ("traffic", *_headers(factors)):
        table.add_column(col)
    for source in result["sources"]:
        for row in source["rows"]:
            table.add_row(source["source"], *_cells(row, factors))
    return table


def _reading(result: dict[str, Any], source: dict[str, Any]) -> list[str]:
    """One data-driven line per judge rate: which estimators detected every spike, and which none."""
    lines = []
    for rate in result["rates"]:
        rows = {r["estimator"]: r for r in source["rows"] if r["rate"] == rate}
        parts = []
        for f in _factors(result):
            always = [SHORT[e] for e, r in rows.items() if r[f]["detected"] == r[f]["of"]]
            never = [SHORT[e] for e, r in rows.items() if r[f]["detected"] == 0]
            parts.append(f"{f} detected in every seed by {', '.join(always) or 'none'}"
                         + (f", never by {', '.join(never)}" if never else ""))
        ppi, judge = rows["ppi"]["quiet_mae_points"]["median"], rows["judge"]["quiet_mae_points"]["median"]
        parts.append(f"rate error without a spike: PPI {fmt(ppi, 2)} vs judge slice {fmt(judge, 2)} points")
        lines.append(f"- judge rate {rate:g}: " + "; ".join(parts) + ".")
    return lines


def _source_markdown(result: dict[str, Any], source: dict[str, Any]) -> list[str]:
    model, factors = source["model"], _factors(result)
    return [
        f"**{source['source']}**: {source['conversations']} conversations (DSAT share {source['dsat_share']:.1%} "
        f"before resampling). Judge: {source['judge']}. Distilled model: {model['recipe']}, trained on "
        f"{_range(model['training_labels'])} labels ({model['training']}); held-out ROC-AUC on the replayed "
        f"conversations {_range(model['heldout_auc'], 3)}; {fmt(model['score_cpu_ms_per_conversation'], 2)} ms of "
        f"CPU to score one (featurize + LR, in process). The simulation took {fmt(source['cpu_s'], 0)} CPU seconds "
        f"for {source['simulated_conversations']:,} simulated conversations "
        f"({fmt(source['cpu_us_per_simulated_conversation'], 2)} µs each, model training included).", "",
        _md(_headers(factors), [_cells(r, factors) for r in source["rows"]]), "",
        *_reading(result, source), ""]


def detect_markdown(result: dict[str, Any]) -> str:
    rule = result["rule"]
    factors = _factors(result)
    out = [
        f"Traffic replayed at {result['volume_per_hour']:,} conversations an hour in simulated minutes (Poisson "
        f"arrivals), DSAT share {result['base_share']:g}, resampled to {', '.join(factors)} that share for "
        f"{result['spike_minutes']} minutes after {fmt(result['history_hours'], 0)} hours of baseline; false alarms "
        f"on {fmt(result['quiet_days'], 0)} simulated days without a spike; {len(result['seeds'])} seeds (median "
        "[range]). Per seed the conversations are split in two: the distilled model (what `convmon distill train` "
        "builds) is trained on the first, traffic is drawn from the second. The judge is an oracle (the label "
        "itself, what an LLM judge would give if it agreed with the annotators), flipped with probability "
        f"{result['judge_noise']:g}. Every estimator sees the same judged slice: equal judge spend.",
        "",
        f"Alert: the shipped `ConvmonDsatSpike`, read from `deploy/prometheus/rules` at run time (30-minute rate > "
        f"{rule['ratio']:g} × baseline, at least {rule['min_difference']:g} above it, z > {rule['min_z']:g}, "
        f"≥ {rule['min_count']:g} conversations in the window, `for: {rule['for_minutes']}m`), evaluated every "
        "simulated minute over exact per-minute counts: window = the last 30 minutes; baseline = up to 7 days ending "
        f"at the last {rule['baseline_step']}-minute boundary at or before 30 minutes ago (the "
        f"`[7d:{rule['baseline_step']}m] offset 30m` subquery); pooled two-proportion z; firing when true at 16 "
        "consecutive evaluations (pending, then `ts − activeAt ≥ 15m`); "
        "`tests/bench/test_detect_rule.py` checks this evaluation against promtool minute by minute (Prometheus may "
        "evaluate the alert on recordings a minute old, so a real page can come up to a minute later). The "
        "prediction-powered rows are the shipped `ConvmonDsatSpikeCorrected` on the live corrected rate "
        "(docs/metrics.md, \"Corrected rates\"; the same constants, or the benchmark refuses to run): its own "
        "standard error, so its z is (p_w − p_b) / sqrt(se_w² + se_b²); its volume guard counts the "
        "conversations its rate covers (all of them), or, in the last row of each rate, the judged ones (not "
        f"shipped), and a second guard wants {rule.get('min_judged', 30):g} judged conversations in the window; "
        "the same test checks it against promtool. Minutes to detect: from the spike's start to the "
        "first firing evaluation, while a 30-minute window still holds spike traffic (later: not detected). Error: "
        "|30-minute rate − the rate judging all traffic would export|, mean over minutes, in points. Coverage: the "
        "share of minutes whose 95 % interval holds that rate. `ConvmonDsatSpike` pages on the judge's rates only "
        "(a distilled model's rate moves at each promotion, CHANGELOG); the distilled rows show what the same "
        "expression would do on those rates.",
        "",
        "Limits: the judge is an oracle, so the judge slice is as good as it gets (a noisy judge moves every "
        "judge-based rate alike: `--judge-noise`); traffic without a spike is stationary (the same conversations "
        "at the same share), so a distilled model's bias never drifts here and its false alarms under real drift "
        "are not measured; the spike moves only the DSAT share, not what DSAT conversations look like.",
        "",
    ]
    for source in result["sources"]:
        out += _source_markdown(result, source)
    if result.get("plot"):
        out += [f"![rates around the spike]({Path(result['plot']).name})"]
    return "\n".join(out).strip()
