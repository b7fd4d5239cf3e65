"""Benchmark JSON as the markdown sections of ``docs/benchmarks.md``: a table per benchmark, the text that says
how it was measured, and whether the bars were met (USS accuracy in ``doc_use.py``). ``doc.py`` puts the
sections together."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


COST_ESTIMATORS = {"judge_only": "judge only", "distilled_only": "distilled only", "ppi": "prediction-powered",
                   "ppi_tuned": "PPI++ (tuned)"}


def _slice(value: float | None) -> str:
    return "none of those measured" if value is None else f"{value:.1%}"


def _md(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def distill_markdown(result: dict[str, Any]) -> str:
    summary = result.get("summary", [])
    out = [f"Teacher: {result.get('teacher', '?')}. Held-out set: {result.get('test_size')} conversations. "
           "AUC per item; macro = mean over items the held-out set has both classes of.", "",
           _md(["featurizer", "teacher labels", "macro AUC", "min item AUC", "items trained", "untrained"],
               [[s["featurizer"], str(s["labels"]), fmt(s["macro_auc"], 3), fmt(s.get("min_auc"), 3),
                 str(s["items"]), str(s["untrained"])] for s in summary])]
    uss = result.get("uss")
    if uss:
        rows = {(r["featurizer"], r["labels"]): r for r in uss.get("results", [])}
        out += ["", f"A harder teacher on real text: {uss['teacher']}. Whole dialogues of "
                f"{', '.join(uss.get('files', []))}; held-out set: {uss.get('test_size')} dialogues "
                f"({100 * uss.get('test_positive_rate', 0):.1f} % positive), training sets nested in the other "
                "dialogues.", "",
                _md(["featurizer", "teacher labels", "positives", "AUC", "status"],
                    [[s["featurizer"], str(s["labels"]),
                      str(rows.get((s["featurizer"], s["labels"]), {}).get("train_positives", "-")),
                      fmt(s["macro_auc"], 3), rows.get((s["featurizer"], s["labels"]), {}).get("status", "-")]
                     for s in uss.get("summary", [])])]
    return "\n".join(out)


# Beside results saved without ``engine`` (bench/throughput.py): the worker that produced them is gone.
FAUST_ERA = ("Measured on the faust engine, since removed (with it the framework floor rows, faust with no work); "
             "rerun the command above to measure the worker as it is.")


def throughput_markdown(result: dict[str, Any]) -> str:
    rows = [["raw aiokafka consume + orjson decode", fmt(result.get("raw_consume_per_s")), "100 %"]]
    rows += [[f"monitor end to end, distilled `{k}`", fmt(v), f"{100 * result['ratio'][k]:.2f} %"]
             for k, v in result.get("monitor_per_s", {}).items()]
    rows += [[f"`{k}` featurize alone (in-process)", fmt(v), "-"]
             for k, v in result.get("featurize_per_s", {}).items()]
    batch_size = result.get("batch", "?")
    rows += [[f"`{k}` decode + featurize + predict + score records alone (in-process, batches of {batch_size})",
              fmt(v), "-"] for k, v in result.get("standalone_per_s", {}).items()]
    uss = result.get("source") == "uss"
    source = (f"real conversations, the USS dialogues of {', '.join(result.get('uss_files') or ['?'])}" if uss
              else "conversations from the simulator (template sentences, which repeat)")
    shape = (f" ({fmt(result['turns_per_conversation'])} turns and {fmt(result['chars_per_conversation'], 0)} "
             "characters per conversation on average)" if result.get("turns_per_conversation") else "")
    workers = result.get("worker_processes", 1)
    if result.get("mode") == "turns":
        out = [f"{result.get('conversations')} {source}{shape} as turn and end events "
               f"({fmt(result.get('messages_per_conversation'))} messages per conversation), all open at once and "
               f"interleaved (one turn of each conversation per round), {result.get('partitions')} partitions, "
               f"{workers} worker process(es) in one group, `sample_rate=0` (distilled path only). Raw consume is "
               "the bare consumer's message rate over the same messages, in conversations / s."]
    else:
        out = [f"{result.get('conversations')} finished {source}{shape}, {result.get('partitions')} "
               f"partitions, {workers} worker process(es), `sample_rate=0` (distilled path only)."]
    if result.get("engine") is None:
        out += ["", FAUST_ERA]
    if result.get("distinct_texts_per_conversation") is not None:
        out += ["", "An embedding featurizer encodes each distinct user turn and assistant context of a batch "
                f"once: about {fmt(result['distinct_texts_per_conversation'], 2)} texts per conversation here, "
                f"in batches of {batch_size}."
                + (" (The simulator's sentences repeat so much that it needs fewer than one, which is why this "
                   "benchmark reads real dialogues by default.)" if uss else "")]
    out += ["", _md(["path", "conversations / s", "share of raw"], rows)]
    if result.get("otlp"):
        from bench.otlp_throughput import otlp_markdown

        out += ["", otlp_markdown(result["otlp"], _md, fmt)]
    if result.get("minilm_encode_fraction") is not None:
        out += ["", "MiniLM: monitor rate / standalone MiniLM featurize rate = "
                f"{100 * result['minilm_encode_fraction']:.1f} %."]
    checks = []
    if "hashing" in result.get("ratio", {}):
        ok = result["ratio"]["hashing"] >= 0.15
        alone, raw = (result.get("featurize_per_s") or {}).get("hashing"), result.get("raw_consume_per_s")
        checks.append(f"`hashing` at >= 15 % of raw consume: {'met' if ok else 'not met'} "
                      f"({100 * result['ratio']['hashing']:.2f} %"
                      + (f"; the featurizer alone, in-process, reaches {100 * alone / raw:.2f} %" if alone and raw
                         else "") + ")")
    if result.get("minilm_encode_fraction") is not None:
        ok = result["minilm_encode_fraction"] >= 0.9
        checks.append(f"`minilm` at >= 90 % of its standalone encode rate: {'met' if ok else 'not met'} "
                      f"({100 * result['minilm_encode_fraction']:.1f} %)")
    if checks:
        out += ["", "Targets: " + "; ".join(checks) + "."]
    cpu = result.get("worker_cpu_cores") or {}
    if cpu:
        out += ["", "Worker CPU while measured (cores; 1.0 = one core busy): "
                + ", ".join(f"`{k}` {fmt(v, 2)}" for k, v in cpu.items() if v is not None) + "."]
    machine = result.get("machine_cpu_cores") or {}
    shares = [f"{name}: workers {fmt(m['workers'], 2)}, broker {fmt(m['broker'], 2)}, driver {fmt(m['driver'], 2)}"
              for name, m in machine.items() if all(m.get(k) is not None for k in ("workers", "broker", "driver"))]
    if shares:
        out += ["", "The same cores also ran the broker and the driver (this benchmark's process: it produces the "
                "input and reads the scores), cores while measured: " + "; ".join(shares) + ". The raw row's "
                "consumer had the broker to itself."]
    batches = {k: v for k, v in (result.get("worker_batch_mean") or {}).items() if v is not None}
    if batches:
        seconds = result.get("worker_batch_seconds_mean") or {}
        out += ["", "Worker batches while measured (`convmon_classify_batch_*`; under load a distilled score waits "
                "at least one batch time): "
                + ", ".join(f"`{k}` {fmt(v)} conversations, {fmt(seconds.get(k), 3)} s each"
                            for k, v in batches.items()) + "."]
    judge = result.get("judge")
    if judge:
        out += ["", _md(["judge path", "value"], [
            ["server latency (fixed)", f"{fmt(judge.get('server_latency_ms'))} ms"],
            ["concurrency", str(judge["concurrency"])], ["conversations / s", fmt(judge["per_s"])],
            ["p50 latency", f"{fmt(judge['p50_ms'])} ms"], ["p99 latency", f"{fmt(judge['p99_ms'])} ms"],
            *([["slowest call of the first round (cold process; not in p50 / p99 above)",
                f"{fmt(judge['cold_ms'])} ms"], ["p99 latency with the first round",
                                                  f"{fmt(judge.get('p99_with_cold_ms'))} ms"]]
              if judge.get("cold_ms") is not None else [])])]
    record_bytes = result.get("score_record_bytes") or {}
    sizes = [f"`{k}` changelog {fmt(v, 0)} bytes per conversation "
             f"({fmt(result['changelog_to_conversation'][k], 2)}x the "
             f"{fmt(result.get('conversation_bytes'), 0)}-byte conversation), score record "
             f"{fmt(record_bytes.get(k), 0)} bytes"
             for k, v in (result.get("changelog_bytes_per_conversation") or {}).items()]
    if sizes:
        out += ["", "Sizes (the sessions' changelog records read back after the run): "
                + "; ".join(sizes) + "."]
    bars = [_bar(name, bar) for name, bar in (result.get("bars") or {}).items()]
    if bars:
        out += ["", "Targets: " + "; ".join(bars) + "."]
    rss = result.get("peak_rss_mb_by_featurizer") or {}
    if rss:
        out += ["", "Peak RSS per worker: " + ", ".join(f"`{k}` {fmt(v)} MB" for k, v in rss.items()) + "."]
    if result.get("cpu_rounds"):
        from bench.throughput_cpu import cpu_markdown
        out += ["", cpu_markdown(result)]
    return "\n".join(out)


BAR_TEXT = {
    "turns_at_least_10pct_of_raw": "turn events at >= 10 % of raw consume",
    "conversations_3x_pre18": "whole conversations at >= 3x the earlier monitor's recorded rate",
    "changelog_at_most_2x_conversation": "sessions changelog <= 2x the conversation's bytes",
    "score_record_at_most_600_bytes": "score record <= 600 bytes",
}


def _bar(name: str, bar: dict[str, Any]) -> str:
    """One bar as a sentence: met or not with its measured value, per featurizer where it has one."""
    def one(value: dict[str, Any]) -> str:
        measured = next((f"{k} {v:.3g}" for k, v in value.items() if k in ("ratio", "speedup", "bytes")), "")
        if not value.get("same_run", True):  # a rate from another run (and worker count) proves no bar
            workers = f"; {value['workers']} worker(s) here" if "workers" in value else ""
            return f"not proven ({measured} against a recorded one-worker rate, not the same run{workers})"
        return f"{'met' if value.get('met') else 'not met'} ({measured})"

    text = BAR_TEXT.get(name, f"`{name}`")
    if "met" in bar:
        return f"{text}: {one(bar)}"
    return f"{text}: " + ", ".join(f"`{k}` {one(v)}" for k, v in bar.items() if isinstance(v, dict))


def sampler_markdown(result: dict[str, Any]) -> str:
    rows = [[str(r["seed"]), str(r["labels"]), f"{r['positives_hash_only']} / {r['positives_uncertainty']}",
             fmt(r["auc_hash_only"], 3), fmt(r["auc_uncertainty"], 3), f"{r['gain']:+.3f}"] for r in result["runs"]]
    sd = f" ± {fmt(result['gain_sd'], 3)} (sd over seeds)" if result.get("gain_sd") is not None else ""
    return "\n".join([
        f"Stream: {result['stream']}, {result['stream_size']} prefixes in {result['rounds']} chunks, retraining "
        f"after each (unweighted); holdout: the other half of the dialogues ({result['holdout_size']} prefixes, "
        "uniform like the hash slice). Uncertainty arm: the router's `InclusionPolicy`, "
        f"{result['policy']}; hash-only arm: as many uniform labels as the uncertainty arm took in each chunk "
        "(equal judge spend). Teacher ROC-AUC of the final model on the holdout:", "",
        _md(["seed", "labels per arm", "positives (hash / uncertainty)", "hash only", "uncertainty", "gain"], rows),
        "", f"Mean AUC: hash only {fmt(result['mean_auc_hash_only'], 3)}, uncertainty "
            f"{fmt(result['mean_auc_uncertainty'], 3)}; gain {result['mean_gain']:+.3f}{sd}."])


def cost_markdown(result: dict[str, Any]) -> str:
    names = COST_ESTIMATORS
    out = [f"A stream of {result['volume_per_hour']:,} conversations per hour, {result['windows']} 1-hour windows "
           "per slice; each window mixes two regimes (simulator: normal and a DSAT spike; USS: its two corpora) in "
           "a random share, so rates move from hour to hour. Error = exported rate minus the rate judging all of "
           "that hour's traffic would export, in percentage points; the table gives the 95th percentile of |error| "
           "over windows for the worst item (and the median item). The distilled models are trained with "
           "`distill.train.train_items` (hashing) on the labels the slice collects in "
           f"{fmt(result['train_hours'], 0)} h. Spend: the SPUR prompt and answer at ~4 characters per token, "
           f"`{result['model']}` at ${result['price_usd_per_million_tokens'][0]} / "
           f"${result['price_usd_per_million_tokens'][1]} per 1M input / output tokens "
           "(`monitor/contracts/settings.py` DEFAULT_PRICES).", ""]
    for source in result["sources"]:
        spend = source["spend"]
        out += [f"**{source['source']}** ({source['items']} item(s)); teacher: {source['teacher']}. "
                f"{fmt(spend['prompt_tokens'], 0)} prompt + {fmt(spend['output_tokens'], 0)} output tokens per "
                f"judged conversation, ${fmt(spend['usd_per_million_judged'], 2)} per 1M judged.", "",
                _md(["slice", "judged / h", "training labels", "USD per 1M conversations",
                     *[f"{n} (worst / median item)" for n in names.values()]],
                    [[f"{r['slice']:.1%}", fmt(r["judged_per_hour"], 0), str(r["training_labels"]),
                      fmt(r["usd_per_million"], 2),
                      *[f"{fmt(r[f'{e}_p95_max_points'], 2)} / {fmt(r[f'{e}_p95_median_points'], 2)}"
                        for e in names]] for r in source["rows"]]), ""]
        smallest = source["smallest_slice_within_tolerance"]
        out.append(f"Smallest slice keeping every rate within ±{fmt(result['tolerance_points'], 0)} point at 95 %: "
                   + "; ".join(f"{n}: {_slice(smallest[e])}" for e, n in names.items()) + ". Goal: ≤ 1 %.")
        out.append("")
        if source.get("by_volume"):
            out += [f"Smallest slice within ±{fmt(result['tolerance_points'], 0)} point by volume (models trained on "
                    "what each slice collects at that volume, capped as above; 0.5 % is the smallest slice measured; "
                    "V conversations an hour over H hours judge the same sample as V·H in one hour):", "",
                    _md(["conversations / h", *names.values()],
                        [[f"{v['volume_per_hour']:,}", *[_slice(v["smallest_slice_within_tolerance"][e])
                                                          for e in names]] for v in source["by_volume"]]), ""]
    out += ["Reading: a judge-only rate from n judged conversations has a 95 % error of about "
            "1.96·sqrt(p(1-p)/n) points, so ±1 point on rates of 10-50 % takes thousands of judged conversations "
            "per window, whatever the slice. The prediction-powered rates replace p(1-p) by the variance of the "
            "residuals (label − probability), which judge noise and imperfect models keep well above zero; PPI++'s "
            "tuning changes little here because the models are good enough that lambda stays near 1. The "
            "distilled-only rate has almost no variance but carries the model's bias, which moves with the traffic "
            "mix (up to 4-5 points on the worst simulator item), so it never meets ±1 point. Hence the volume "
            "sweep: the ≤ 1 % goal is a statement about judged conversations per window, met from about 1M "
            "conversations an hour (or a 100-hour window at 10,000 an hour), not at 10,000 an hour.", ""]
    if result.get("plot"):
        out.append(f"![error against spend]({Path(result['plot']).name})")
    return "\n".join(out).strip()
