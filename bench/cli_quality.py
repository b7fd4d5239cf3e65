"""``convmon bench`` commands that measure quality: USE accuracy (SPUR Table 1), distillation fidelity, judge
cost, spike detection, the sampler, PII recall."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from bench.cli_common import (
    DEFAULT_DATA,
    USE_CURVE,
    USE_FULL_MODELS,
    USE_MODELS,
    AsJson,
    Out,
    Quiet,
    Seed,
    app,
    console,
    csv_values,
    emit,
    float_values,
    progress_lines,
    run_bench,
)


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
    overall: Annotated[bool, typer.Option("--overall/--no-overall", help="Also the OVERALL protocol: whole-"
                                          "conversation DSAT on the dialogue-level OVERALL rating, candidate recipes "
                                          "chosen by nested CV on MWOZ+SGD, CCPE out of domain.")] = True,
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
    from bench.doc_tables import use_table
    from bench.use import full_config, quick_config, run_use

    make = full_config if full else quick_config
    overrides: dict[str, Any] = {"datasets": csv_values(datasets), "splits": splits, "limit": limit, "seed": seed,
                                 "n_jobs": n_jobs}
    if models is not None:
        overrides["models"] = csv_values(models)
    if curve is not None:
        overrides["curve"] = float_values(curve)
    if not dsat:
        overrides["dsat"] = None
    if not overall:
        overrides["overall"] = None
    config = make(data, **overrides)
    emit(run_bench(lambda: run_use(config, progress_lines(quiet))), as_json, out, use_table)


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
    from bench.distill_fidelity import FidelityConfig, run_fidelity
    from bench.doc_tables import distill_table

    config = FidelityConfig(labels=[int(v) for v in csv_values(labels)], featurizers=csv_values(featurizers),
                            test_size=test_size, rubric=rubric, seed=seed, uss=uss, data_dir=data,
                            uss_labels=[int(v) for v in csv_values(uss_labels)], uss_test_size=uss_test_size,
                            uss_featurizers=None if uss_featurizers is None else csv_values(uss_featurizers))
    emit(run_bench(lambda: run_fidelity(config, progress_lines(quiet))), as_json, out, distill_table)


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
    from bench.cost import CostConfig, run_cost
    from bench.doc_tables import cost_table
    from monitor.contracts.errors import ConfigError
    from monitor.contracts.settings import DEFAULT_PRICES

    def job() -> dict[str, Any]:
        if model not in DEFAULT_PRICES:
            raise ConfigError(f"--model {model!r} has no price in DEFAULT_PRICES ({', '.join(DEFAULT_PRICES)})")
        rates = float_values(slices)
        if not rates or any(not 0 < r <= 1 for r in rates):
            raise ConfigError(f"--slices must be numbers in (0, 1]. Got {slices!r} instead.")
        sweep = float_values(volumes)
        if not sweep or any(v < 100 or v != int(v) for v in sweep):
            raise ConfigError(f"--volumes must be whole numbers >= 100. Got {volumes!r} instead.")
        names = csv_values(sources)
        if not names or set(names) - {"simulator", "uss"}:
            raise ConfigError(f"--sources must name simulator and/or uss. Got {sources!r} instead.")
        config = CostConfig(volume_per_hour=volume, volumes=[int(v) for v in sweep], slices=rates, windows=windows,
                            judge_noise=judge_noise,
                            sim_pool=sim_pool, max_training_labels=max_training_labels, data_dir=data, model=model,
                            seed=seed)
        return run_cost(config, progress_lines(quiet), sources=names, plot=plot)

    emit(run_bench(job), as_json, out, cost_table)


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
    label: Annotated[str, typer.Option(help="USS traffic's DSAT label: spur (the dialogue label of SPUR Appendix "
                                            "B) or overall (mean OVERALL rating below 3, item dsat.overall).")]
    = "spur",
    featurizer: Annotated[str, typer.Option(help="The distilled model's featurizer spec (as distill train "
                                                 "--featurizer), e.g. hashing+lexicon.")] = "hashing",
    plot: Annotated[Path | None, typer.Option(help="Write the rates-over-time PNG here.")] = None,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Time to detect a DSAT spike with the shipped alert rule, and false alarms per day, for the judge slice,
    the distilled rate and the prediction-powered rate at equal judge spend (USS traffic, simulated time)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from bench.detect import DetectConfig, run_detect
    from bench.doc_detect import detect_table
    from monitor.contracts.errors import ConfigError

    def job() -> dict[str, Any]:
        judge_rates, sizes = float_values(rates), float_values(factors)
        if not judge_rates or any(not 0 < r <= 1 for r in judge_rates):
            raise ConfigError(f"--rates must be numbers in (0, 1]. Got {rates!r} instead.")
        if not sizes or any(f <= 1 for f in sizes):
            raise ConfigError(f"--factors must be numbers above 1. Got {factors!r} instead.")
        names = csv_values(sources)
        if not names or set(names) - {"uss", "simulator"}:
            raise ConfigError(f"--sources must name uss and/or simulator. Got {sources!r} instead.")
        config = DetectConfig(sources=names, data_dir=data, datasets=csv_values(datasets), sim_pool=sim_pool,
                              volume_per_hour=volume, rates=judge_rates,
                              factors=sizes, base_share=base_share, seeds=[int(v) for v in csv_values(seeds)],
                              quiet_days=quiet_days, history_hours=history_hours, spike_minutes=spike_minutes,
                              judge_noise=judge_noise, max_training_labels=max_training_labels, limit=limit,
                              label=label, featurizer=featurizer)
        if quiet:
            return run_detect(config, plot=plot)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task("bench detect", total=None)

            def progress(message: str, done: int, total: int) -> None:
                bar.update(task, description=message, completed=done, total=total)

            return run_detect(config, progress, plot=plot)

    emit(run_bench(job), as_json, out, detect_table)


@app.command()
def sampler(
    rate: Annotated[float, typer.Option(min=0.001, max=0.5, help="Judged share of the stream in both arms.")] = 0.15,
    rounds: Annotated[int, typer.Option(min=2, help="Stream chunks (retraining after each).")] = 3,
    seeds: Annotated[str, typer.Option(help="Seeds (routing salt, chunk order).")] = "0,1,2",
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/).")] = DEFAULT_DATA,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Teacher-AUC on a hash-only holdout at equal judge spend: hash-only vs uncertainty sampling (USS stream)."""
    from bench.doc_tables import sampler_table
    from bench.sampler_gain import SamplerConfig, run_sampler

    config = SamplerConfig(rate=rate, rounds=rounds, seeds=[int(v) for v in csv_values(seeds)], data_dir=data)
    emit(run_bench(lambda: run_sampler(config, progress_lines(quiet))), as_json, out, sampler_table)


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
    from bench.pii import run

    root = data.parent if data.name == "uss" else data
    result = run_bench(lambda: run(root, csv_values(datasets), csv_values(regions) if regions is not None else None,
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

    emit(result, as_json, out, table)
