"""The ``convmon`` command line. Settings are built here, once, and passed down."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from monitor.errors import ConfigError, ConvmonError
from monitor.settings import Settings

app = typer.Typer(help="convmon: streaming user-satisfaction monitor for chat assistants.", no_args_is_help=True)
console = Console(stderr=True)


def load_settings(**overrides: object) -> Settings:
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "<settings>"
        raise ConfigError(f"setting '{field}' (CONVMON_{field.upper()} or convmon.toml): {err['msg']}") from exc


def _logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@app.command()
def broker(port: Annotated[int, typer.Option(help="Port to listen on.")] = 9092,
           host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1") -> None:
    """Run the embedded Tansu broker until Ctrl-C (development and demos only)."""
    from monitor.broker import EmbeddedBroker

    with EmbeddedBroker(host=host, port=port) as b:
        console.print(f"broker ready on [bold]{b.url}[/bold]; Ctrl-C to stop")
        with contextlib.suppress(KeyboardInterrupt):
            signal.sigwait({signal.SIGINT, signal.SIGTERM})


@app.command()
def worker(verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False) -> None:
    """Run all agents (sessionize, route, judge, classify, export, label sink) and serve /metrics."""
    _logging(verbose)
    from monitor.worker import run_worker

    run_worker(load_settings(), loglevel="info" if verbose else "warn")


@app.command()
def simulate(
    rate: Annotated[float, typer.Option(help="Conversations started per second.")] = 5.0,
    duration: Annotated[float, typer.Option(help="Seconds to run.")] = 60.0,
    dsat_spike_at: Annotated[float | None, typer.Option(help="Seconds after start when DSAT spikes.")] = None,
    spike_factor: Annotated[float, typer.Option(help="Multiplier on every DSAT pattern rate.")] = 4.0,
    idle_fraction: Annotated[float, typer.Option(help="Share of conversations without an end event.")] = 0.0,
    turn_gap: Annotated[float, typer.Option(help="Seconds between turns of one conversation.")] = 0.2,
    seed: int = 0,
) -> None:
    """Produce synthetic conversation events with known ground-truth rubric patterns."""
    from monitor.rubrics import load_rubric_set
    from monitor.simulator.run import SimulationPlan
    from monitor.simulator.run import simulate as run

    settings = load_settings()
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    plan = SimulationPlan(rate=rate, duration_s=duration, turn_gap_s=turn_gap, dsat_spike_at_s=dsat_spike_at,
                          spike_factor=spike_factor, idle_fraction=idle_fraction, seed=seed)
    stats = asyncio.run(run(settings, rubric, plan))
    console.print(f"produced {stats.events} events for {stats.conversations} conversations "
                  f"({stats.spiked_conversations} during the DSAT spike) to {settings.topic('events')}")


@app.command()
def replay(path: Annotated[Path, typer.Argument(help="A USS .txt file or a JSONL event file.")]) -> None:
    """Produce a dataset file as events, in original turn order."""
    from monitor.produce import produce_events
    from monitor.replay import read_dataset

    settings = load_settings()
    replayed = read_dataset(path)
    asyncio.run(produce_events(settings, replayed.events))
    skipped = f" (left out {replayed.empty_utterances} empty utterances)" if replayed.empty_utterances else ""
    console.print(f"replayed {len(replayed.events)} events from {path} to {settings.topic('events')}{skipped}")


@app.command()
def soak(
    minutes: Annotated[float, typer.Option(help="How long to run.")] = 10.0,
    rate: Annotated[float, typer.Option(help="Conversations per second.")] = 10.0,
) -> None:
    """Run broker + worker + simulator at a fixed rate; report throughput, lag and RSS over time."""
    from monitor.soak import soak as run

    run(minutes, rate)


@app.command()
def demo(
    duration: Annotated[float, typer.Option(help="Seconds to run.")] = 60.0,
    rate: Annotated[float, typer.Option(help="Conversations per second.")] = 8.0,
    port: Annotated[int, typer.Option(help="Port for the worker's /metrics.")] = 9100,
) -> None:
    """Broker + worker + simulator on one machine, with a live table of per-rubric SAT/DSAT rates."""
    from monitor.demo import run_demo

    run_demo(load_settings(), duration_s=duration, rate=rate, metrics_port=port)




def _mount_subcommands() -> None:
    from distill.bench.cli import app as bench_app
    from distill.calibration.cli import app as calibrate_app
    from distill.cli import app as distill_app
    from distill.rubrics.cli import app as rubrics_app

    app.add_typer(calibrate_app, name="calibrate", help="LLM-Rubric calibration of judge answers.")
    app.add_typer(rubrics_app, name="rubrics", help="Learn, evaluate and apply rubric sets.")
    app.add_typer(distill_app, name="distill", help="Train, evaluate and publish distilled classifiers.")
    app.add_typer(bench_app, name="bench", help="Accuracy and throughput benchmarks (JSON output).")


_mount_subcommands()


def main() -> None:
    try:
        app()
    except ConvmonError as exc:
        console.print(f"[red]error:[/red] {exc}")
        sys.exit(2)


if __name__ == "__main__":
    main()
