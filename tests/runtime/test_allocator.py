"""The worker's allocator: the soak and the image preload jemalloc, and a process says which malloc it runs on."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry, Gauge

from monitor.contracts.errors import ConfigError
from monitor.runtime.allocator import (
    MALLOC_CONF,
    HeapReader,
    allocator_of,
    export_heap,
    find_jemalloc,
    jemalloc_env,
    with_malloc,
)

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


# Exports the live heap on a registry (as the worker does), allocates 64 MiB in 1 KiB objects, frees them:
# prints the allocator and the gauge's values before, while held and after, in bytes.
HEAP_CHILD = """
import json
from prometheus_client import CollectorRegistry, Gauge
from monitor.runtime.allocator import export_heap
r = CollectorRegistry()
heap = Gauge("heap", "h", ["allocator"], registry=r)
blocks = Gauge("blocks", "b", registry=r)
allocator = export_heap(heap, blocks)
def read():
    return {s.labels["allocator"]: s.value for m in r.collect() if m.name == "heap" for s in m.samples}
def blocks_now():
    return next(s.value for m in r.collect() if m.name == "blocks" for s in m.samples)
before, blocks_before = read(), blocks_now()
held = [bytes([i % 256]) * (1024 - 33) for i in range(64 * 1024)]
during, blocks_during = read(), blocks_now()
del held
print(json.dumps({"allocator": allocator, "before": before, "during": during, "after": read(),
                  "blocks": [blocks_before, blocks_during]}))
"""


def _heap_child(env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", HEAP_CHILD], env=env, capture_output=True, text=True, check=True,
                         timeout=60).stdout
    return cast(dict[str, Any], json.loads(out))


@pytest.mark.parametrize("malloc", ["jemalloc", "glibc"])
def test_a_process_exports_its_live_heap_and_it_follows_what_it_holds(malloc: str) -> None:
    """64 MiB held in 1 KiB objects shows as about 64 MiB more heap (labelled with the allocator that was read),
    and comes back when they are freed; the interpreter's block count rises by the 65,536 objects."""
    got = _heap_child(with_malloc({"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}, malloc))
    assert got["allocator"] == malloc
    before, during, after = (got[k][malloc] for k in ("before", "during", "after"))
    mib = 1024 * 1024
    assert 0.5 * mib < before < 200 * mib  # an interpreter with prometheus_client loaded: a few MB
    assert 63 * mib < during - before < 70 * mib  # 1024-byte mallocs (glibc adds a 16-byte header to each)
    assert after - before < 4 * mib
    assert got["blocks"][1] - got["blocks"][0] >= 64 * 1024


def test_no_heap_series_when_the_allocator_cannot_be_read() -> None:
    registry = CollectorRegistry()
    heap = Gauge("heap", "h", ["allocator"], registry=registry)
    reader = HeapReader()
    reader.allocator = None  # as under a malloc that is neither jemalloc nor glibc
    assert export_heap(heap, Gauge("blocks", "b", registry=registry), reader) is None
    assert [s for m in registry.collect() if m.name == "heap" for s in m.samples] == []
    assert [s.value for m in registry.collect() if m.name == "blocks" for s in m.samples][0] > 1000
