"""``convmon bench``: accuracy against the papers, speed against the physical limit, distillation fidelity.

Every command prints a rich table, or JSON with ``--json``; ``--out FILE`` also saves the JSON,
which ``bench report`` renders into ``docs/benchmarks.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench import cli_drift, cli_quality, cli_speed  # noqa: F401  (they register their commands on app)
from bench.cli_common import (
    DEFAULT_DATA,
    USE_CURVE,
    USE_FULL_MODELS,
    USE_MODELS,
    Quiet,
    app,
    console,
    progress_lines,
    run_bench,
)

__all__ = ["USE_CURVE", "USE_FULL_MODELS", "USE_MODELS", "app"]


@app.command()
def report(
    results: Annotated[Path, typer.Option(help="Directory of bench JSON files (use.json, use-turns.json, ...).")]
    = Path("var/bench"),
    doc: Annotated[Path, typer.Option(help="Main markdown page to write; the speed and alerting pages go beside "
                                      "it.")] = Path("docs/benchmarks.md"),
    run: Annotated[bool, typer.Option("--run/--no-run", help="Run every benchmark first (about 80 minutes).")]
    = False,
    data: Annotated[Path, typer.Option(help="Shared data directory for `use`.")] = DEFAULT_DATA,
    quiet: Quiet = False,
) -> None:
    """Write docs/benchmarks.md and its pages from saved results (``--run`` regenerates them first)."""
    from bench.doc import regenerate

    path = run_bench(lambda: regenerate(results, doc, run=run, data_dir=data, progress=progress_lines(quiet)))
    console.print(f"wrote {path}")
