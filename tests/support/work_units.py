"""How ``make test`` and ``make faults`` spread their tests over test processes (pytest-xdist).

``make test`` (``--dist loadfile --no-loadscope-reorder``) hands out the files in the order ``longest_first`` gives
them. xdist's own order, the files with the most tests first, started the slowest broker files (one or two tests
each) last, and the run's last minutes were one or two of them waiting on their workers while the other test
processes had nothing left to do.

``make faults`` (``--dist loadscope``) runs units of work. The fault and long tests mostly wait on brokers, workers,
judges and Prometheus, so two processes run two fault runs side by side. A unit of work runs whole in one process: a
test file by default, so a module-scoped fault run happens once (as under ``--dist loadfile``); the files named
below split finer. The units are named here, from node ids, because xdist's ``loadgroup`` (``xdist_group`` marks)
reads them from a node id it rewrites, which pytest 9.2 no longer lets it do: it then spreads the tests one by one
and every process repeats the module-scoped runs (https://github.com/pytest-dev/pytest-xdist/issues/1386).
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

# make test's files of 45 s or more: seconds alone on 2 cores (2026-12-07). Handed out first, longest first: a file
# of a minute started near the end is the end of the run.
LONGEST = {
    "tests/reliability/test_faults.py": 94,
    "tests/runtime/test_health.py": 87,
    "tests/deploy/test_container_argv.py": 81,
    "tests/integration/test_otlp_e2e.py": 69,
    "tests/bench/test_bench.py": 67,
    "tests/integration/test_reopen_e2e.py": 65,
    "tests/integration/test_partition_totals.py": 65,
    "tests/judge/test_real_servers.py": 65,
    "tests/integration/test_otlp_logs_e2e.py": 60,
    "tests/integration/test_input_topic.py": 57,
    "tests/integration/test_readme_quickstart.py": 46,
}

# One module-scoped fault run per parameter, checked by several tests: a unit per parameter.
PER_PARAMETER = frozenset({"tests/reliability/test_delivery_faults.py"})
# Independent runs of a minute or more each: a unit per test.
PER_TEST = frozenset({
    "tests/reliability/test_checkpoint_crash_points.py",
    "tests/reliability/test_faults.py",
    "tests/integration/test_demo.py",
    "tests/integration/test_input_topic.py",
    "tests/deploy/test_prometheus_native.py",
})


def unit(nodeid: str) -> str:
    """The unit of work a test belongs to."""
    path = nodeid.split("::", 1)[0]
    if path in PER_TEST:
        return nodeid
    if path in PER_PARAMETER and nodeid.endswith("]"):
        return path + nodeid[nodeid.index("["):]
    return path


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The files of LONGEST, longest first, then the others by number of tests (xdist's order); each file's tests
    in their own order."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = sorted(files, key=lambda path: (-LONGEST.get(path, 0), -len(files[path])))
    return [item for path in order for item in files[path]]


class RunUnits(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no type information
    """xdist's scope scheduling (units in order of size, each whole on one process) over ``unit``."""

    def _split_scope(self, nodeid: str) -> str:
        return unit(nodeid)
