"""The CLI's surface: every option described and every numeric one bounded; one-line errors; fast --help."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer._click.core import Command, Context
from typer.core import TyperGroup

from monitor.cli import LAZY_SUBCOMMANDS, app, load_subcommand
from monitor.contracts.settings import REPO_ROOT
from monitor.runtime.broker import free_port


def commands() -> Iterator[tuple[str, Command]]:
    root = typer.main.get_command(app)

    def walk(path: str, command: Command) -> Iterator[tuple[str, Command]]:
        if isinstance(command, TyperGroup):
            ctx = Context(command)
            for name in command.list_commands(ctx):
                sub = load_subcommand(name) if name in LAZY_SUBCOMMANDS and path == "convmon" else \
                    command.get_command(ctx, name)
                assert sub is not None
                yield from walk(f"{path} {name}", sub)
        else:
            yield path, command

    yield from walk("convmon", root)


ALL = list(commands())


def test_every_option_has_a_description_and_every_number_a_range() -> None:
    undescribed, unbounded = [], []
    for path, command in ALL:
        for param in command.params:
            if param.param_type_name != "option" or param.name == "help":
                continue
            if not (param.help or "").strip():
                undescribed.append(f"{path} {param.opts[0]}")
            numeric = param.type_descriptor.annotation in (int, float)  # Optional[int] resolves to int here
            if numeric and param.min is None and param.max is None:
                unbounded.append(f"{path} {param.opts[0]}")
    assert undescribed == [] and unbounded == [], (undescribed, unbounded)
    assert len(ALL) >= 20


def test_shell_completion_is_offered_once_at_the_top_not_by_every_sub_app() -> None:
    root = typer.main.get_command(app)
    assert {"install_completion", "show_completion"} <= {p.name for p in root.params}
    subs = [load_subcommand(name) for name in LAZY_SUBCOMMANDS] + [command for _, command in ALL]
    offered = [sub.name for sub in subs if {p.name for p in sub.params} & {"install_completion", "show_completion"}]
    assert offered == []
    assert "--install-completion" not in run("topics", "--help").stdout  # the path `convmon` itself takes


def test_no_help_text_loses_a_bracketed_default_to_rich_markup() -> None:
    """Rich reads "[default: X]" as a markup tag and drops it ("Label store URL ."); help says (default: X)."""
    for path, command in ALL:
        for param in command.params:
            assert "[default" not in (getattr(param, "help", None) or ""), f"{path} {param.name}"


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("CONVMON_", "OPENAI_"))}
    full["PYTHONPATH"] = str(REPO_ROOT)
    full["COLUMNS"] = "200"
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "monitor.cli", *args], capture_output=True, text=True,
                          timeout=120, env=full, cwd=cwd)


@pytest.mark.parametrize("args", [["replay", "{events}"], ["simulate", "--duration", "1"], ["worker"],
                                  ["topics", "check"], ["topics", "create"]], ids=" ".join)
def test_an_unreachable_broker_is_one_line_naming_the_url_and_the_setting(args: list[str], tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text('{"conversation_id": "c", "turn_index": 0, "role": "user", "text": "hi", "timestamp": 1}\n')
    url = f"kafka://127.0.0.1:{free_port()}"  # nothing listens there
    result = run(*[a.format(events=events) for a in args], env={"CONVMON_BROKER_URL": url}, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"error: cannot reach Kafka at {url} (CONVMON_BROKER_URL): KafkaConnectionError\n"


@pytest.mark.parametrize(("args", "bad"), [
    (["simulate", "--rate", "-5"], "--rate"), (["simulate", "--idle-fraction", "1.5"], "--idle-fraction"),
    (["demo", "--port", "70000"], "--port"), (["calibrate", "evaluate", "--folds", "1", "--train-judgments", "x",
                                                "--train-evaluations", "y"], "--folds"),
    (["bench", "throughput", "--partitions", "0"], "--partitions"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_out_of_range_numbers_are_refused_before_anything_runs(args: list[str], bad: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert f"Invalid value for '{bad}'" in result.stderr
    assert "greater than or equal to" in result.stderr or "less than or equal to" in result.stderr


def test_worker_help_names_the_environment_and_the_toml_file() -> None:
    text = run("worker", "--help").stdout
    for needle in ("CONVMON_", "convmon.toml", "CONVMON_BROKER_URL", "/readyz", "--verbose"):
        assert needle in text


HEAVY = ("torch", "sklearn", "faust", "aiokafka", "onnxruntime", "sentence_transformers", "openai", "sqlalchemy",
         "croniter", "matplotlib", "distill", "monitor.runtime", "monitor.judge", "monitor.tools")
PROBE = """
import runpy, sys
sys.argv = ["convmon", "--help"]
try:
    runpy.run_module("monitor.cli", run_name="__main__")
except SystemExit:
    pass
print("LOADED", sorted({m.split('.')[0] if not m.startswith('monitor.') else '.'.join(m.split('.')[:2])
                        for m in sys.modules}))
"""


def test_top_level_help_loads_no_heavy_module() -> None:
    """`convmon --help` stays well under 0.5 s (0.3-0.4 s on an idle 2-core machine) because it imports
    none of the libraries that take seconds; a wall-clock test would measure the machine's load instead."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")} | {"PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, env=env)
    assert "retrain" in result.stdout
    loaded = result.stdout.rsplit("LOADED", 1)[1]
    assert [m for m in HEAVY if f"'{m}'" in loaded] == []
