"""The worker's allocator: the soak and the image preload jemalloc, and a process says which malloc it runs on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from monitor.contracts.errors import ConfigError
from monitor.runtime.allocator import MALLOC_CONF, allocator_of, find_jemalloc, jemalloc_env, with_malloc

# Prints which allocator the child process finds mapped.
CHILD = "from monitor.runtime.allocator import allocator_of; print(allocator_of())"


def _run(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()


def test_jemalloc_is_installed_and_preloading_it_shows_in_the_process() -> None:
    library = find_jemalloc()
    assert library, "jemalloc is not installed: the image and `convmon soak` need it (apt-get install libjemalloc2)"
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    assert _run(base) == "glibc"  # the control: nothing preloaded
    env = jemalloc_env({**base, "LD_PRELOAD": "libc.so.6"}, library)
    assert env["LD_PRELOAD"] == f"{library} libc.so.6"  # ahead of what was preloaded, which stays
    assert env["MALLOC_CONF"] == MALLOC_CONF
    assert jemalloc_env({**base, "MALLOC_CONF": "narenas:1"}, library)["MALLOC_CONF"] == "narenas:1"  # kept
    assert jemalloc_env(env, library) == env  # never twice
    assert _run(env) == "jemalloc"


def test_allocator_of_a_process_that_is_gone_is_unknown() -> None:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    assert allocator_of(int(proc.stdout)) == "unknown"


def test_with_malloc_preloads_jemalloc_or_nothing_and_refuses_other_names() -> None:
    assert with_malloc({"A": "1"}, "glibc") == {"A": "1"}
    assert with_malloc({"A": "1"}, "jemalloc") == {"A": "1", "LD_PRELOAD": find_jemalloc(), "MALLOC_CONF": MALLOC_CONF}
    with pytest.raises(ConfigError, match="'jemalloc' or 'glibc'"):
        with_malloc({}, "tcmalloc")
