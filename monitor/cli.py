"""The ``convmon`` command line. Settings are built here, once, and passed down.

`convmon --help` must answer in well under 0.2 s of CPU: this module imports only typer and rich at the
top; settings (pydantic-settings), asyncio and every command's code are imported inside the command
(tests/cli/test_cli_surface.py checks what `import monitor.cli` loads).
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer
from rich.console import Console
from typer._click.core import Command, Context  # typer vendors click; its own types for overrides
from typer.core import TyperGroup

from monitor.contracts.errors import ConfigError, ConvmonError

if TYPE_CHECKING:
    from monitor.contracts.settings import Settings

T = TypeVar("T")


def load_settings(**overrides: Any) -> Settings:
    """The settings, imported on first use: pydantic-settings alone is a third of a second of CPU."""
    from monitor.contracts.settings import load_settings as load

    return load(**overrides)

# Sub-apps are imported only when named on the command line: they pull in torch, scikit-learn and
# the judge client, and `convmon --help` or a one-line error must not wait seconds for that.
LAZY_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "calibrate": ("distill.calibration.cli", "LLM-Rubric calibration of judge answers."),
    "rubrics": ("distill.rubrics.cli", "Learn, evaluate and apply rubric sets."),
    "distill": ("distill.cli", "Train, evaluate and publish distilled classifiers."),
    "bench": ("bench.cli", "Accuracy and throughput benchmarks, JSON output (from a source checkout)."),
    "models": ("distill.models_cli", "Prebuild local model files (the int8 ONNX MiniLM)."),
    "dead-letters": ("monitor.tools.dead_letters", "Read the dead-letter topic: reason, field and detail of each."),
    "judge": ("monitor.judge.check_cli", "Check the configured judge endpoint (`judge check`)."),
    "anchors": ("monitor.tools.anchors.cli", "Judge drift on a human-labelled anchor set (load, run, status)."),
    "labels": ("monitor.tools.review.labels_cli", "Human labels: import reviewers' answers from CSV or JSONL."),
    "topics": ("monitor.tools.topics_cli", "Create or check convmon's Kafka topics (clusters with auto-create off)."),
}


class LazyGroup(TyperGroup):
    """A typer group whose sub-apps load on first use; listing them in --help loads nothing."""

    def list_commands(self, ctx: Context) -> list[str]:
        return [*super().list_commands(ctx), *LAZY_SUBCOMMANDS]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in LAZY_SUBCOMMANDS:
            return super().get_command(ctx, cmd_name)
        if ctx.resilient_parsing:
            return load_subcommand(cmd_name)
        return TyperGroup(name=cmd_name, help=LAZY_SUBCOMMANDS[cmd_name][1])  # for the listing only

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        if args and args[0] in LAZY_SUBCOMMANDS:
            return args[0], load_subcommand(args[0]), args[1:]
        return super().resolve_command(ctx, args)


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    import asyncio

    return asyncio.run(coroutine)


def _benchmarks_on_path() -> None:
    """The benchmarks are not installed with the package: they run from a source checkout (an editable
    install), found beside the ``monitor`` package this command runs from."""
    checkout = Path(__file__).resolve().parents[1]
    if not (checkout / "bench" / "cli.py").is_file():
        raise ConfigError("`convmon bench` runs from a source checkout: the benchmarks are not installed with the "
                          "package (clone the repository, `make install` there and run it from the clone)")
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))


def load_subcommand(name: str) -> Command:
    module, help_text = LAZY_SUBCOMMANDS[name]
    if module.startswith("bench."):
        _benchmarks_on_path()
    command = typer.main.get_command(importlib.import_module(module).app)
    command.name, command.help = name, command.help or help_text
    # shell completion is installed for `convmon` as a whole, not per sub-app
    command.params = [p for p in command.params if p.name not in ("install_completion", "show_completion")]
    return command


app = typer.Typer(help="convmon: streaming user-satisfaction monitor for chat assistants.", no_args_is_help=True,
                  cls=LazyGroup)
console = Console(stderr=True)


VERBOSE_HELP = "Log at INFO, including the Kafka client's connection attempts."


def _quiet_connect_errors(record: logging.LogRecord) -> bool:
    """aiokafka logs 'Unable connect to ...' at ERROR on every attempt; convmon reports it once, naming the setting."""
    return not str(record.msg).startswith("Unable connect to")


def _warn_unknown_environment() -> None:
    """A misspelt CONVMON_* variable is otherwise ignored without a word."""
    import os

    from monitor.contracts.env_check import check_environment

    for line in check_environment(os.environ):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _logging(verbose: bool) -> None:
    from monitor.judge.logsafe import install_log_safety

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_safety()  # no credentials from OPENAI_BASE_URL in any log line
    if verbose:
        logging.getLogger("aiokafka").removeFilter(_quiet_connect_errors)


@app.command()
def broker(port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 9092,
           host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
           storage_engine: Annotated[str, typer.Option(
               help="Where Tansu keeps the topics. memory://tansu/ (the default) loses every record, "
                    "acknowledged or not, when the broker stops or crashes; s3://BUCKET/ (an S3 server named by "
                    "AWS_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_ALLOW_HTTP in "
                    "the environment) keeps them across a restart or a kill -9. The shipped Tansu binary has these two "
                    "engines only (not postgres:// or sqlite://).")] = "memory://tansu/") -> None:
    """Run the embedded Tansu broker until Ctrl-C or SIGTERM, which stop it too (development and demos only)."""
    import signal

    from monitor.runtime.broker import STORAGE_ENGINES, EmbeddedBroker, serve_until_signalled

    if storage_engine.split("://", 1)[0] not in STORAGE_ENGINES or "://" not in storage_engine:
        console.print(f"[red]error:[/red] --storage-engine {storage_engine!r}: use memory://NAME/ or s3://BUCKET/ "
                      "(the engines the shipped Tansu binary was built with)", soft_wrap=True)
        raise typer.Exit(code=2)
    durable = "" if storage_engine.startswith("memory://") else f", topics kept in {storage_engine.split('@')[-1]}"
    signum = serve_until_signalled(EmbeddedBroker(host=host, port=port, storage_engine=storage_engine),
                                   on_ready=lambda b: console.print(
        f"broker ready on [bold]{b.url}[/bold] (pid {b.pid}{durable}); Ctrl-C to stop"))
    console.print(f"broker stopped ({signal.Signals(signum).name})")


@app.command()
def worker(verbose: Annotated[bool, typer.Option("--verbose", "-v", help=VERBOSE_HELP)] = False) -> None:
    """Run all agents (sessionize, route, judge, classify, export, label sink) and serve /metrics.

    Settings come from CONVMON_* environment variables or convmon.toml in the working directory
    (every one is listed in docs/settings.md): CONVMON_BROKER_URL and the CONVMON_KAFKA_* SASL/TLS settings,
    OPENAI_API_KEY / OPENAI_BASE_URL for the judge, CONVMON_LABEL_STORE_URL, CONVMON_MODEL_REGISTRY.
    Serves /metrics, /healthz (liveness) and /readyz (joined the consumer group) on
    CONVMON_METRICS_HOST:CONVMON_METRICS_PORT. Workers never retrain: run one `convmon retrain`.
    """
    _logging(verbose)
    _warn_unknown_environment()
    from monitor.runtime.worker import run_worker

    run_worker(load_settings(), loglevel="info" if verbose else "warn")


@app.command()
def retrain(
    once: Annotated[bool, typer.Option("--once", help="Run one round now and exit (for a Kubernetes CronJob); "
                                       "exit code 1 if a part of it failed.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details (failure tracebacks, "
                                          "the training libraries' INFO lines).")] = False,
) -> None:
    """Retrain the distilled models, then the calibration, on the CONVMON_RETRAIN_CRON schedule.

    Run exactly one retrainer per deployment (workers never retrain): this long-running process, or
    `retrain --once` from a scheduler. A failed round is logged, counted in convmon_retrain_rounds_total
    and retried at the next one. Serves /metrics on CONVMON_METRICS_HOST:CONVMON_RETRAIN_METRICS_PORT.
    CONVMON_RETRAIN_CRON=off turns retraining off. Settings come from CONVMON_* variables or convmon.toml.
    """
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not verbose:
        logging.getLogger().setLevel(logging.WARNING)
        logging.getLogger("convmon").setLevel(logging.INFO)
    _warn_unknown_environment()
    from monitor.runtime.retrainer import run_retrainer

    raise typer.Exit(run_retrainer(load_settings(), once=once))


@app.command()
def simulate(
    rate: Annotated[float, typer.Option(min=0.001, help="Conversations started per second.")] = 5.0,
    duration: Annotated[float, typer.Option(min=0.0, help="Seconds to run.")] = 60.0,
    dsat_spike_at: Annotated[float | None, typer.Option(
        min=0.0, help="Seconds after start when DSAT spikes (default: no spike).")] = None,
    spike_factor: Annotated[float, typer.Option(min=0.0, help="Multiplier on every DSAT pattern rate.")] = 4.0,
    idle_fraction: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Share of conversations without an end event.")] = 0.0,
    turn_gap: Annotated[float, typer.Option(min=0.0, help="Seconds between turns of one conversation.")] = 0.2,
    seed: Annotated[int, typer.Option(min=0, help="Random seed: the same seed produces the same events.")] = 0,
) -> None:
    """Produce synthetic conversation events with known ground-truth rubric patterns.

    Sends to <CONVMON_TOPIC_PREFIX>events on CONVMON_BROKER_URL (settings: CONVMON_* or convmon.toml).
    """
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.tools.simulator.run import SimulationPlan
    from monitor.tools.simulator.run import simulate as run

    settings = load_settings()
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    plan = SimulationPlan(rate=rate, duration_s=duration, turn_gap_s=turn_gap, dsat_spike_at_s=dsat_spike_at,
                          spike_factor=spike_factor, idle_fraction=idle_fraction, seed=seed)
    stats = _run(run(settings, rubric, plan))
    console.print(f"produced {stats.events} events for {stats.conversations} conversations "
                  f"({stats.spiked_conversations} during the DSAT spike) to {settings.topic('events')}")


@app.command()
def replay(
    path: Annotated[Path, typer.Argument(help="A USS .txt file or a JSONL event file.")],
    relative_time: Annotated[bool, typer.Option(
        "--relative-time", help="Drop the file's own event times: each event takes the time it is produced, so "
                                "an old data set is scored as live traffic (score delay, idle timeouts).")] = False,
    fmt: Annotated[Literal["json", "openai", "uss"] | None, typer.Option(
        "--format", help="json: convmon events; openai: Chat Completions conversations or messages (and convmon "
                         "events); uss: a USS file. Default: by suffix (.jsonl json, .txt uss).")] = None,
) -> None:
    """Produce a dataset file as events, in original turn order, to CONVMON_BROKER_URL."""
    from monitor.runtime.produce import produce_events
    from monitor.tools.replay import read_dataset

    settings = load_settings()
    replayed = read_dataset(path, relative_time=relative_time, fmt=fmt)
    _run(produce_events(settings.kafka, replayed.events))
    left = [f"{n} {what}" for n, what in ((replayed.empty_utterances, "empty utterances"),
                                          (replayed.skipped_messages, "messages that are not turns")) if n]
    skipped = f" (left out {', '.join(left)})" if left else ""
    console.print(f"replayed {len(replayed.events)} events from {path} to {settings.topic('events')}{skipped}")


@app.command()
def soak(
    minutes: Annotated[float, typer.Option(min=0.1, help="How long to run.")] = 10.0,
    rate: Annotated[float, typer.Option(min=0.1, help="Conversations per second.")] = 10.0,
    out: Annotated[Path | None, typer.Option(help="Directory for soak.json and soak-rss.png (default: the run's "
                                                  "temporary directory, printed).")] = None,
    retrain_interval: Annotated[float, typer.Option(
        min=1, help="Seconds between rounds of the retrainer process (a large value isolates the stream's own "
                    "memory).")] = 60.0,
    retention: Annotated[float | None, typer.Option(min=1, help="Seconds for closed_retention_s, dedup_window_s and "
                                                         "reopen_window_s (default: the settings' 1 h, 2 days and "
                                                         "1 day).")] = None,
    warmup: Annotated[float | None, typer.Option(min=0, help="Seconds before memory is judged (default: the "
                                                      "longest window + idle timeout + 60 s, the state's fill "
                                                      "time).")] = None,
    malloc: Annotated[Literal["jemalloc", "glibc"], typer.Option(
        help="The worker's allocator: jemalloc (preloaded, as the container image does) or glibc's malloc.")
    ] = "jemalloc",
    inject_leak: Annotated[float, typer.Option(
        min=0, help="Make the worker leak this many MB a minute (a control: the memory verdict must catch it).")
    ] = 0.0,
) -> None:
    """Run broker + worker + simulator at a fixed rate; report throughput, lag, RSS and the live heap over time
    (JSON + PNG)."""
    from monitor.tools.soak import soak as run

    run(minutes, rate, out_dir=out, retrain_interval_s=retrain_interval, retention_s=retention, warmup_s=warmup,
        malloc=malloc, inject_leak_mb_per_min=inject_leak)


@app.command()
def demo(
    duration: Annotated[float, typer.Option(help="Seconds of simulated traffic (the DSAT spike starts half-way).",
                                            min=10)] = 100.0,
    rate: Annotated[float, typer.Option(help="Conversations per second.", min=0.1)] = 20.0,
    port: Annotated[int, typer.Option(help="Port for the worker's /metrics.", min=1, max=65535)] = 9100,
    window: Annotated[float, typer.Option(help="Seconds of the recent window the rates are shown over.",
                                          min=2)] = 20.0,
    alert_scale: Annotated[float, typer.Option(help="Divide every duration of the shipped alert rules by this "
                                                    "(30m -> 15s at 120).", min=1)] = 120.0,
    spike: Annotated[bool, typer.Option(help="Simulate the DSAT spike half-way; --no-spike is the control run, "
                                             "where no alert should fire.")] = True,
) -> None:
    """Broker + worker + retrainer + simulator on one machine, a quarter of the traffic judged: per-rubric rates
    over a recent window beside the run's baseline, the shipped DSAT-spike alerts (on the corrected distilled rate
    and on the judged slice) evaluated by Prometheus (when installed), and a PNG plot at the end."""
    from monitor.tools.demo import run_demo

    run_demo(load_settings(), duration_s=duration, rate=rate, metrics_port=port, window_s=window,
             alert_scale=alert_scale, spike=spike)


@app.command()
def forget(conversation_ids: Annotated[list[str], typer.Argument(
        help="Conversation ids to erase, or their references (ref-..., as exemplars carry them).")]) -> None:
    """Erase conversations from every store convmon owns; JSON on stdout says what was removed and what
    could not be (topics until their retention, Prometheus exemplars); a summary goes to stderr."""
    from monitor.contracts.json_output import dumps
    from monitor.runtime.retention import forget as erase

    ids = [cid for cid in conversation_ids if cid.strip()]
    if not ids:
        raise ConfigError("convmon forget: give at least one non-empty conversation id")
    settings = load_settings()
    report = erase(settings.kafka, settings.distill, settings.rubrics, ids,
                   reference_key=settings.judge.pii_reference_key)
    for line in report.lines(list(report.ids)):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    print(dumps(report.as_json()))


@app.command()
def inspect(
    item: Annotated[str, typer.Option(help="Rubric item id, e.g. a DSAT item of the rubric set.")],
    window: Annotated[str, typer.Option(help="How far back: 30m, 6h, 2d.")] = "1h",
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Most rows to print.")] = 20,
    scorer: Annotated[str | None, typer.Option(help="llm or distilled; both if unset.")] = None,
) -> None:
    """The latest conversations an item said yes for (score sink rows), with their trace ids; text redacted."""
    from monitor.tools.inspect import inspect_rows, parse_window, print_rows

    if scorer not in (None, "llm", "distilled"):
        raise ConfigError(f"--scorer {scorer!r}: expected llm or distilled")
    settings = load_settings()
    rows = inspect_rows(settings.rubrics, settings.judge, settings.distill, item, window_s=parse_window(window),
                        limit=limit, scorer=scorer)
    print_rows(rows, item, Console())


@app.command()
def ui(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every request.")] = False) -> None:
    """The review page: flagged conversations with the judge's reasons, the review queue, judge-vs-human agreement
    (and its /metrics), on CONVMON_UI_HOST:CONVMON_UI_PORT (127.0.0.1:8050)."""
    from monitor.tools.review.app import serve

    _logging(verbose)
    settings = load_settings()
    console.print(f"convmon ui on http://{settings.ui_host}:{settings.ui_port}/ (label writes "
                  f"{'on' if settings.ui_labels else 'off: CONVMON_UI_LABELS=true'})", highlight=False)
    serve(settings)


def main() -> None:
    # An unreachable broker is reported once, as one line naming CONVMON_BROKER_URL; the client's own
    # per-attempt error lines come back with --verbose.
    logging.getLogger("aiokafka").addFilter(_quiet_connect_errors)
    try:
        app()
    except ConvmonError as exc:
        console.print(f"[red]error:[/red] {exc}", soft_wrap=True)  # one line, whatever the terminal width
        sys.exit(2)


if __name__ == "__main__":
    main()
