"""Benchmark JSON as rich tables for the terminal (``convmon bench ...`` without ``--json``)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from bench.doc_markdown import COST_ESTIMATORS, fmt


# --- terminal tables ----------------------------------------------------------------------------
def use_table(result: dict[str, Any]) -> Table:
    table = Table(title="USE, SPUR Table 1 protocol (weighted, %)")
    for col in ("dataset", "model", "train", "test", "precision", "recall", "weighted F1", "source"):
        table.add_column(col)
    for r in result["results"]:
        table.add_row(r["dataset"], r["model"], fmt(r["train_fraction"], 2), fmt(r["test_fraction"], 2),
                      fmt(r["precision"]), fmt(r["recall"]), fmt(r["weighted_f1"]), "measured")
    for r in result.get("paper", []):
        table.add_row(r["dataset"], r["model"], "0.05", "0.80", "-", "-", fmt(r["weighted_f1"]), "paper")
    return table


def distill_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"Distilled vs teacher ({result.get('teacher', '')}): per-item AUC")
    for col in ("featurizer", "labels", "macro AUC", "items", "untrained"):
        table.add_column(col)
    for s in result.get("summary", []):
        table.add_row(s["featurizer"], str(s["labels"]), fmt(s["macro_auc"], 3), str(s["items"]),
                      str(s["untrained"]))
    for s in (result.get("uss") or {}).get("summary", []):
        table.add_row(f"{s['featurizer']} (USS human teacher)", str(s["labels"]), fmt(s["macro_auc"], 3),
                      str(s["items"]), str(s["untrained"]))
    return table


def throughput_table(result: dict[str, Any]) -> Table:
    table = Table(title="Throughput (conversations / s)")
    table.add_column("path")
    table.add_column("per s")
    table.add_column("vs raw consume")
    table.add_row("raw aiokafka consume + orjson", fmt(result.get("raw_consume_per_s")), "1.00")
    for name, rate in result.get("monitor_per_s", {}).items():
        table.add_row(f"monitor, distilled ({name})", fmt(rate), fmt(result["ratio"].get(name), 3))
    for name, rate in result.get("standalone_per_s", {}).items():
        table.add_row(f"{name} featurize+predict, standalone", fmt(rate), "-")
    if result.get("otlp"):
        from bench.otlp_throughput import otlp_rows

        for path, rate, share in otlp_rows(result["otlp"]):
            table.add_row(path, fmt(rate), fmt(share, 3))
    judge = result.get("judge") or {}
    if judge:
        table.add_row(f"judge (c={judge['concurrency']}, p50 {fmt(judge['p50_ms'])} ms, "
                      f"p99 {fmt(judge['p99_ms'])} ms)", fmt(judge["per_s"]), "-")
    for mode, paths in (result.get("cpu_us_per_conversation") or {}).items():  # the alternated rounds
        ratio = result["cpu_rounds"]["raw_to_monitor_cpu"][mode]["median"]
        for path, cpu in paths.items():
            table.add_row(f"{mode}, {path}: CPU {fmt(cpu['median'], 0)} µs / conversation (median)",
                          fmt(result["cpu_rounds"]["per_s"][mode][path]["median"]),
                          f"CPU raw / monitor {fmt(ratio, 3)}" if path == "monitor" else "-")
    return table


def cost_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"Per-item rate error, 95 % over 1-hour windows of {result['volume_per_hour']} conversations "
                        "(points, worst item)")
    for col in ("source", "slice", "USD / 1M", *COST_ESTIMATORS.values()):
        table.add_column(col)
    for source in result["sources"]:
        for r in source["rows"]:
            table.add_row(source["source"], f"{r['slice']:.1%}", fmt(r["usd_per_million"], 2),
                          *[fmt(r[f"{e}_p95_max_points"], 2) for e in COST_ESTIMATORS])
    return table


def sampler_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"Holdout AUC at equal judge spend ({result['stream']})")
    for col in ("seed", "labels per arm", "hash only", "uncertainty", "gain"):
        table.add_column(col)
    for r in result["runs"]:
        table.add_row(str(r["seed"]), str(r["labels"]), fmt(r["auc_hash_only"], 3), fmt(r["auc_uncertainty"], 3),
                      fmt(r["gain"], 3))
    return table
