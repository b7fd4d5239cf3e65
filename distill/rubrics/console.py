"""What ``convmon rubrics`` prints: errors, progress bars, the plan and report tables, and exit 3.

Messages go to stderr one per line (also when not a terminal); tables go to stdout at the terminal's
width, or unlimited when piped, so no column is cut off.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from distill.rubrics.learn import Drops, too_little
from distill.rubrics.measure import METRICS, SetReport
from monitor.contracts.errors import ConvmonError

console = Console(stderr=True, soft_wrap=True)  # one line per message, also when not a terminal
TOO_LITTLE = 3  # exit code: the run finished, but its result rests on too few usable answers


@contextlib.contextmanager
def errors() -> Iterator[None]:
    try:
        yield
    except ConvmonError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(code=2) from exc


def stdout() -> Console:
    """Tables for stdout: the terminal's width, or unlimited when piped or redirected (no cut-off columns)."""
    return Console() if sys.stdout.isatty() else Console(width=100_000, soft_wrap=True)


@contextlib.contextmanager
def progress() -> Iterator[Callable[[str, int], Callable[[], None]]]:
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bars:
        def track(label: str, total: int) -> Callable[[], None]:
            task = bars.add_task(label, total=total)
            return lambda: bars.advance(task)

        yield track


def plan_table(rows: list[Any], model: str) -> Table:
    table = Table(title=f"rubrics learn --dry-run (model {model})")
    for column in ("stage", "calls", "cached", "prompt tokens", "output tokens", "est. cost USD"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    for r in rows:
        cost = "no price" if r.cost_usd is None else f"{r.cost_usd:.4f}"
        table.add_row(r.stage, str(r.calls), str(r.cached), str(r.prompt_tokens), str(r.output_tokens), cost)
    known = [r.cost_usd for r in rows if r.cost_usd is not None]
    table.add_row("total", str(sum(r.calls for r in rows)), str(sum(r.cached for r in rows)), "", "",
                  f"{sum(known):.4f}" if known else "no price")
    return table


def exit_if_too_little(reports: list[SetReport], max_dropped: float) -> None:
    drops = [Drops(f"{r.key}", r.n + r.failed, r.failures or {"unusable": r.failed}) for r in reports if r.failed]
    for d in drops:
        console.print(f"dropped: {escape(str(d))}")
    if short := too_little(drops, max_dropped):
        every = [d.stage for d in short if d.dropped == d.answers]
        console.print(f"[red]error:[/red] measured on too little: {len(short)} set(s) lost more than --max-dropped "
                      f"{max_dropped:g} of their answers" + (f"; every answer failed for {', '.join(every)}, whose "
                                                             "metrics are undefined" if every else ""))
        raise typer.Exit(code=TOO_LITTLE)


def report_table(name: str, n: int, positive: str, reports: list[SetReport]) -> Table:
    table = Table(title=f"{name}: {n} conversations, positive={positive}, 95% bootstrap CI")
    for column in ("set", "n", *METRICS):
        table.add_column(column)
    for r in reports:
        table.add_row(f"{r.name}\n{r.key}", f"{r.n}" + (f" ({r.failed} failed)" if r.failed else ""),
                      *(cell(r.values[m], r.ci.get(m)) for m in METRICS))
    return table


def cell(value: float, ci: tuple[float, float] | None) -> str:
    def number(x: float, digits: int) -> str:
        return f"{x:.{digits}f}" if math.isfinite(x) else "n/a"

    return number(value, 3) + (f" [{number(ci[0], 2)}, {number(ci[1], 2)}]" if ci else "")
