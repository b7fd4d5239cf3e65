"""``convmon bench`` runs from a source checkout; an installed package without the benchmarks says so in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import typer

from monitor.cli import load_subcommand
from monitor.contracts.settings import REPO_ROOT


def test_the_wheel_ships_monitor_and_distill_but_not_the_benchmarks() -> None:
    include = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert sorted(include["include"]) == ["distill*", "monitor*"]


def test_bench_is_found_in_the_checkout_when_it_is_not_on_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """An editable install puts only ``monitor`` and ``distill`` on the path, not the checkout root."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != REPO_ROOT])
    for name in [m for m in sys.modules if m == "bench" or m.startswith("bench.")]:
        monkeypatch.delitem(sys.modules, name)
    command = load_subcommand("bench")
    assert command.name == "bench"
    assert Path(sys.modules["bench.cli"].__file__ or "").resolve() == REPO_ROOT / "bench" / "cli.py"
    assert "throughput" in typer.main.get_group(sys.modules["bench.cli"].app).list_commands(None)  # type: ignore[arg-type]


def test_outside_a_checkout_bench_is_one_line_saying_where_it_runs(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"  # the package as a wheel installs it: monitor and distill, no bench
    for package in ("monitor", "distill"):
        shutil.copytree(REPO_ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVMON_", "OPENAI_"))}
    env |= {"PYTHONPATH": str(site), "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "monitor.cli", "bench", "throughput", "--help"],
                            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "error: `convmon bench` runs from a source checkout: the benchmarks are not installed with the package "
        "(clone the repository, `make install` there and run it from the clone)"]
