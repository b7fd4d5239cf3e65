"""Fast start, by what is imported (not by a timing, which would measure the machine's load): `import monitor.cli`
loads no settings library, no faust and no scipy (`convmon --help` in ~0.15 s of CPU), and importing the worker
loads neither scipy, scikit-learn, the openai package, SQLAlchemy (the judge's budget ledger imports it when a
judge is built) nor httpx (with the openai client): 2.5 s of CPU at first, 0.77 s before SQLAlchemy and httpx went
lazy, 0.59 s after (median of 5 fresh interpreters, one machine)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import rankdata

from monitor.contracts.settings import REPO_ROOT
from monitor.drift.agreement import average_ranks

PROBE = "import sys, {module}; print(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"


def loaded(module: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")} | {"PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], capture_output=True, text=True,
                            timeout=120, env=env, check=True)
    return set(result.stdout.split())


@pytest.mark.parametrize(("module", "absent"), [
    ("monitor.cli", {"pydantic_settings", "pydantic", "faust", "scipy", "asyncio", "aiokafka", "openai"}),
    ("monitor.runtime.worker", {"scipy", "sklearn", "openai", "torch", "sqlalchemy", "httpx"}),
])
def test_importing_loads_none_of_the_slow_libraries(module: str, absent: set[str]) -> None:
    modules = loaded(module)
    assert module.split(".")[0] in modules
    assert modules & absent == set()


def test_average_ranks_are_scipys_rankdata() -> None:
    rng = np.random.default_rng(0)
    for values in ([0.3, 0.1, 0.3, 0.9, 0.1, 0.1], list(rng.integers(0, 5, 200) / 4), list(rng.random(50))):
        assert np.allclose(average_ranks(values), rankdata(values))
