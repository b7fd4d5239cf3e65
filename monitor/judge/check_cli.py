"""``convmon judge check``: preflight the configured judge endpoint (see :mod:`monitor.judge.check`)."""

from __future__ import annotations

import asyncio

import typer

from monitor.contracts.settings import load_settings

app = typer.Typer(help="Check the configured judge endpoint.", no_args_is_help=True)


@app.callback()
def judge() -> None:
    """The LLM judge's endpoint (a callback keeps `check` a subcommand while it is the only one)."""


@app.command("check")
def check_command(
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """Ask the endpoint three short questions: reachability and latency, which JSON-schema answer format it
    takes, whether it returns logprobs; then print the settings to use. Exit 1 when it cannot be used."""
    from prometheus_client import CollectorRegistry

    from monitor.contracts.errors import ConfigError
    from monitor.contracts.json_output import dumps
    from monitor.contracts.metrics import Metrics
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.judge.check import check_endpoint

    settings = load_settings()
    if not settings.judge.judge_configured:
        raise ConfigError("no judge endpoint is configured: set OPENAI_API_KEY and/or OPENAI_BASE_URL "
                          "(or CONVMON_OPENAI_*)")
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    report = asyncio.run(check_endpoint(settings.judge, rubric, Metrics(CollectorRegistry())))
    if as_json:
        print(dumps(report.as_dict()))
    else:
        def seconds(value: float | None) -> str:
            return "-" if value is None else f"{value:.2f} s"

        print(f"endpoint {report.endpoint}, model {report.model!r}")
        print(f"  reachable:         {'yes' if report.reachable.ok else 'no'} ({seconds(report.reachable.latency_s)})")
        print(f"  structured output: {report.structured_output} ({seconds(report.structured.latency_s)})")
        print(f"  logprobs:          {'yes' if report.logprobs.ok else 'no'} ({seconds(report.logprobs.latency_s)})"
              + (f", yes+no mass {report.yes_no_mass:.2f}" if report.yes_no_mass is not None else ""))
        for note in report.notes:
            print(f"  - {note}")
        print("use:" if report.settings else "the current settings fit this endpoint")
        for name, value in report.settings.items():
            print(f"  {name}={value}")
    if not report.usable:
        raise typer.Exit(1)
