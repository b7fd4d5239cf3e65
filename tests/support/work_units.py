"""How ``make faults`` spreads its runs over test processes (pytest-xdist ``--dist loadscope``).

The fault and long tests mostly wait on brokers, workers, judges and Prometheus, so two processes run two fault runs
side by side. A unit of work runs whole in one process: a test file by default, so a module-scoped fault run happens
once (as under ``--dist loadfile``); the files named below split finer. The units are named here, from node ids,
because xdist's ``loadgroup`` (``xdist_group`` marks) reads them from a node id it rewrites, which pytest 9.2 no
longer lets it do: it then spreads the tests one by one and every process repeats the module-scoped runs
(https://github.com/pytest-dev/pytest-xdist/issues/1386).
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

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


class RunUnits(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no type information
    """xdist's scope scheduling (units in order of size, each whole on one process) over ``unit``."""

    def _split_scope(self, nodeid: str) -> str:
        return unit(nodeid)
