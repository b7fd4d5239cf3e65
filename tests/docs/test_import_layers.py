"""The import rules of docs/architecture.md, checked on the source: distill imports only monitor.contracts and
monitor.judge; contracts import nothing else of convmon; stages never import runtime, tools or the CLI; the
installed packages never import the benchmarks (bench/, a checkout only); and there is no import cycle between
modules, lazy imports (inside functions) included."""

from __future__ import annotations

import ast
from pathlib import Path

from monitor.contracts.settings import REPO_ROOT


def _graph(root: Path = REPO_ROOT) -> dict[str, set[str]]:
    mods: dict[str, Path] = {}
    for pkg in ("monitor", "distill", "bench"):
        for path in (root / pkg).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                target = resolve(name)
                # a package's own __init__ is not an edge of its submodules
                if target and target != mod and not mod.startswith(target + "."):
                    graph[mod].add(target)
    return graph


GRAPH = _graph()


def _violations(prefix: str, allowed: tuple[str, ...], forbidden: tuple[str, ...] = ()) -> list[str]:
    out = []
    for mod, targets in GRAPH.items():
        if mod != prefix and not mod.startswith(prefix + "."):
            continue
        for t in sorted(targets):
            inside = t.startswith(("monitor", "distill", "bench"))
            if (forbidden and t.startswith(forbidden)) or (not forbidden and inside and not t.startswith(allowed)):
                out.append(f"{mod} -> {t}")
    return out


def test_distill_imports_only_contracts_and_the_judge() -> None:
    assert _violations("distill", ("distill", "monitor.contracts", "monitor.judge")) == []


def test_contracts_import_nothing_else_of_convmon() -> None:
    assert _violations("monitor.contracts", ("monitor.contracts",)) == []


def test_stages_never_import_runtime_tools_or_cli() -> None:
    assert _violations("monitor.stages", (), forbidden=("monitor.runtime", "monitor.tools", "monitor.cli")) == []


def test_the_installed_packages_never_import_the_benchmarks() -> None:
    """``convmon bench`` loads bench.cli by name, from the checkout, only when it is run."""
    assert _violations("monitor", (), forbidden=("bench",)) == []
    assert _violations("distill", (), forbidden=("bench",)) == []
    assert any(t.startswith("monitor") for t in GRAPH["bench.cli_common"])  # the walk sees bench's imports


def test_no_import_cycles() -> None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    cycles: list[list[str]] = []

    def visit(mod: str, path: list[str]) -> None:
        state[mod] = 1
        for t in sorted(GRAPH[mod]):
            if state.get(t) == 1:
                cycles.append(path[path.index(t):] + [t])
            elif t not in state:
                visit(t, [*path, t])
        state[mod] = 2

    for mod in sorted(GRAPH):
        if mod not in state:
            visit(mod, [mod])
    assert cycles == []


def test_the_walk_sees_lazy_imports() -> None:
    # cli.py imports the demo inside the command function; the graph must still have the edge
    assert "monitor.tools.demo" in GRAPH["monitor.cli"]


def test_judge_and_drift_import_only_contracts() -> None:
    for pkg in ("monitor.judge", "monitor.drift"):
        assert _violations(pkg, (pkg, "monitor.contracts")) == []
