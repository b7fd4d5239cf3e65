"""``convmon bench`` commands that measure speed and memory: throughput against the physical limit, open
conversations, OTLP decoding, the MiniLM backends."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from bench.cli_common import (
    DEFAULT_DATA,
    AsJson,
    Out,
    Quiet,
    Seed,
    app,
    csv_values,
    emit,
    progress_lines,
    run_bench,
)


@app.command()
def throughput(
    conversations: Annotated[int | None, typer.Option(min=1, help="Conversations per measurement (default: "
                                                     "10000 with --mode turns, 2500 with --mode conversations).")]
    = None,
    mode: Annotated[Literal["turns", "conversations"], typer.Option(
        help="Input: 'turns' (turn and end events, all conversations open at once, interleaved) or "
             "'conversations' (one finished-conversation record each).")] = "turns",
    workers: Annotated[int, typer.Option(min=0, help="Worker processes in the group (0: one per core).")] = 0,
    source: Annotated[Literal["uss", "simulator"], typer.Option(
        help="Conversation texts: 'uss' (real dialogues from --data) or 'simulator' (template sentences, "
             "which repeat).")] = "uss",
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/) for --source uss.")]
    = DEFAULT_DATA,
    featurizers: Annotated[str, typer.Option(help="Featurizer specs of the distilled path.")] = "hashing,minilm",
    judge_conversations: Annotated[int, typer.Option(min=1, help="Conversations sent to the judge.")] = 400,
    concurrency: Annotated[int, typer.Option(min=1, help="Concurrent judge calls.")] = 8,
    judge_latency_ms: Annotated[float, typer.Option(min=0.0, help="Fixed latency of the test OpenAI server.")] = 200.0,
    partitions: Annotated[int, typer.Option(min=1, help="Topic partitions.")] = 4,
    otlp: Annotated[bool, typer.Option("--otlp/--no-otlp", help="Also the OTLP-input row (otlp_proto traces, "
                                                                "as `bench otlp-throughput`).")] = True,
    rounds: Annotated[int, typer.Option(min=0, help="Alternated rounds of the CPU-per-conversation measurement "
                                                    "(raw consume and the monitor on both inputs, with "
                                                    "the first featurizer); 0 skips it.")] = 3,
    baseline_checkout: Annotated[Path | None, typer.Option(
        help="Another checkout of the repository (e.g. an older release): its worker also runs in every CPU "
             "round, after this checkout's, on the same input.")] = None,
    baseline_python: Annotated[str | None, typer.Option(
        help="The interpreter of --baseline-checkout's worker (a virtual environment with what it pins); "
             "default: this one.")] = None,
    seed: Seed = 0,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Distilled path vs raw aiokafka consume on the embedded broker; judge path vs a fixed-latency server;
    the CPU time per conversation of each path on both inputs (``cpu_us_per_conversation``), against a
    baseline checkout's worker if given."""
    import sys

    from bench.doc_tables import throughput_table
    from bench.otlp_throughput import with_otlp_row
    from bench.throughput import ThroughputConfig, run_throughput

    config = ThroughputConfig(conversations=conversations, mode=mode, workers=workers, source=source, data_dir=data,
                              featurizers=csv_values(featurizers),
                              judge_conversations=judge_conversations, concurrency=concurrency,
                              judge_latency_s=judge_latency_ms / 1000, partitions=partitions, seed=seed)
    from bench.throughput_cpu import run_cpu_rounds
    from bench.worker_source import WorkerSource

    progress = progress_lines(quiet)
    baseline = (WorkerSource(baseline_checkout.resolve(), baseline_python or sys.executable, older=True)
                if baseline_checkout else None)

    def measure() -> dict[str, Any]:
        result = with_otlp_row(run_throughput(config, progress), otlp, progress)
        return result | (run_cpu_rounds(config, rounds, progress, baseline) if rounds else {})

    emit(run_bench(measure), as_json, out, throughput_table)


@app.command()
def latency(
    rate: Annotated[float, typer.Option(min=0.01, help="Conversations started per second (paced, not a backlog).")]
    = 50.0,
    duration: Annotated[float, typer.Option(min=1.0, help="Seconds over which conversations start (rate x duration "
                                                          "of them).")] = 60.0,
    spread: Annotated[float, typer.Option(min=0.0, help="Seconds a conversation's turns are spread over before its "
                                                        "end event.")] = 5.0,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes in the group.")] = 1,
    partitions: Annotated[int, typer.Option(min=1, help="Topic partitions.")] = 4,
    featurizer: Annotated[str, typer.Option(help="Featurizer spec of the distilled model.")] = "hashing",
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/): the USS dialogues.")]
    = DEFAULT_DATA,
    warmup: Annotated[int, typer.Option(min=1, help="Conversations scored before the paced run.")] = 100,
    drain_timeout: Annotated[float, typer.Option(min=1.0, help="Seconds to wait for the last scores after the "
                                                               "last end event.")] = 120.0,
    worker_checkout: Annotated[Path | None, typer.Option(
        help="Run the worker from this checkout of the repository (e.g. an older release) instead of this one.")]
    = None,
    worker_python: Annotated[str | None, typer.Option(
        help="The worker's interpreter (e.g. a virtual environment with what --worker-checkout pins); default: "
             "this one.")] = None,
    seed: Seed = 0,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Event-to-score latency at a paced input rate: each conversation's end event's produce time to
    its distilled score's timestamp, p50/p95/p99/max, and the worker's CPU per conversation."""
    from rich.table import Table

    from bench.latency import LatencyConfig, latency_rows, run_latency

    config = LatencyConfig(rate=rate, duration_s=duration, spread_s=spread, workers=workers, partitions=partitions,
                           featurizer=featurizer, data_dir=data, warmup=warmup, drain_timeout_s=drain_timeout,
                           worker_checkout=worker_checkout, worker_python=worker_python, seed=seed)

    def table(result: dict[str, Any]) -> Table:
        t = Table("measure", "value", title="event to score latency, paced input")
        for key, value in latency_rows(result):
            t.add_row(key, value)
        return t

    emit(run_bench(lambda: run_latency(config, progress_lines(quiet))), as_json, out, table)


@app.command("open-conversations")
def open_conversations(
    conversations: Annotated[int, typer.Option(min=1, help="One-turn conversations that never end.")] = 100_000,
    max_open: Annotated[int, typer.Option(min=1, help="CONVMON_MAX_OPEN_CONVERSATIONS (per partition).")]
    = 50_000,
    partitions: Annotated[int, typer.Option(min=1, help="Topic partitions.")] = 4,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Memory of N open conversations on one worker, /metrics latency while it ingests, restore time; and the state
    kept per open and per closed (reopenable) conversation and per revision-ledger entry (bench/reopen_state.py)."""
    from rich.table import Table

    from bench.open_conversations import run_open_conversations
    from bench.reopen_state import measure_reopen_state

    def table(result: dict[str, Any]) -> Table:
        t = Table("measure", "value", title="open conversations on one worker")
        for key, value in result.items():
            t.add_row(key, str(value))
        return t

    def run() -> dict[str, Any]:
        result = run_open_conversations(conversations, max_open, partitions, progress=progress_lines(quiet))
        result["reopen_state"] = measure_reopen_state()  # per open and per closed (reopenable) conversation
        return result

    emit(run_bench(run), as_json, out, table)


@app.command("otlp-throughput")
def otlp_throughput(
    conversations: Annotated[int, typer.Option(min=1, help="Conversations to trace.")] = 2000,
    calls: Annotated[int, typer.Option(min=1, help="Assistant calls per conversation (2 turns each).")] = 3,
    per_message: Annotated[int, typer.Option(min=1, help="Conversations per OTLP message.")] = 25,
    warmup: Annotated[int, typer.Option(min=1, help="Conversations scored before timing starts.")] = 50,
    partitions: Annotated[int, typer.Option(min=1, help="Topic partitions.")] = 4,
    seed: Seed = 0,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """The OTLP-input row of `bench throughput` alone: otlp_proto batches vs raw consume of the same bytes."""
    from bench.otlp_throughput import OtlpThroughputConfig, otlp_table, run_otlp_throughput

    config = OtlpThroughputConfig(conversations=conversations, calls=calls, per_message=per_message, warmup=warmup,
                                  partitions=partitions, seed=seed)
    emit(run_bench(lambda: {"otlp": run_otlp_throughput(config, progress_lines(quiet))}), as_json, out, otlp_table)


@app.command("minilm-backends")
def minilm_backends(
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/) or the uss/ folder.")] = DEFAULT_DATA,
    datasets: Annotated[str, typer.Option(help="Comma-separated USS files.")] = "MWOZ,SGD,CCPE",
    batch: Annotated[int, typer.Option(min=1, help="Conversations per transform (the classify batch).")] = 256,
    limit: Annotated[int | None, typer.Option(min=1, help="Use the first N dialogues per file (smoke runs).")] = None,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """MiniLM int8 ONNX vs fp32 torch: featurize rate and embedding cosine on the same conversations."""
    from bench.minilm_backends import minilm_backends_table, run_minilm_backends
    from monitor.contracts.settings import load_settings

    cache = load_settings().model_cache_dir
    emit(run_bench(lambda: run_minilm_backends(data, csv_values(datasets), batch=batch, limit=limit,
                                               progress=progress_lines(quiet),
                                               model_cache_dir=str(cache) if cache else None)),
         as_json, out, minilm_backends_table)


@app.command("otlp-decode")
def otlp_decode(
    conversations: Annotated[int, typer.Option(min=1, help="Conversations to trace.")] = 300,
    calls: Annotated[int, typer.Option(min=1, help="Assistant calls per conversation (2 turns each).")] = 3,
    per_message: Annotated[int, typer.Option(min=1, help="Conversations per OTLP message.")] = 25,
    as_json: AsJson = False,
    out: Out = None,
) -> None:
    """OTLP input decode per conversation vs the JSON path's (same conversations); the bar is <= 2x."""
    from bench.otlp_decode import run_otlp_decode

    result = run_bench(lambda: run_otlp_decode(conversations=conversations, calls=calls, per_message=per_message))

    def table(r: dict[str, Any]) -> Any:
        from rich.table import Table

        t = Table(title="OTLP decode per conversation")
        t.add_column("input")
        t.add_column("us / conversation", justify="right")
        t.add_column("bytes / conversation", justify="right")
        t.add_column("vs json", justify="right")
        t.add_row("json", str(r["json_us_per_conversation"]), str(r["json_bytes_per_conversation"]), "1.00")
        for enc in ("otlp_proto", "otlp_json"):
            t.add_row(enc, str(r[f"{enc}_us_per_conversation"]), str(r[f"{enc}_bytes_per_conversation"]),
                      str(r[f"{enc}_vs_json"]))
        return t

    emit(result, as_json, out, table)
