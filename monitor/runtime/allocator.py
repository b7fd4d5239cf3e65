"""Which malloc a worker runs on, and the environment that makes it jemalloc.

A worker under glibc malloc grows its resident memory in 8-12 MB steps that never come back (1-4.5 MB/min
in 10-minute soaks) while its live native heap stays flat (memray: +9 MB after warm-up against +36 MB of
RSS): the classify threads' numpy/scipy temporaries of varying sizes fragment glibc's arenas. Under
jemalloc, which returns dirty pages after a few seconds, the same soak is flat (docs/reliability.md,
"Soak"). The container image preloads it (``LD_PRELOAD``, Dockerfile); ``convmon soak`` starts its worker
the same way, so the soak measures what ships.
"""

from __future__ import annotations

import ctypes
import glob
import math
import sys
from pathlib import Path

from prometheus_client import Gauge

from monitor.contracts.errors import ConfigError

JEMALLOC = "libjemalloc.so.2"
# Freed pages go back to the system after 1 s instead of jemalloc's 10 s, so RSS stays closer to live memory.
# The soaks that validate the CI check ran with it; it did not, alone, let a 10-minute soak see an injected
# 1.5 MB/min leak. The Dockerfile sets the same.
MALLOC_CONF = "dirty_decay_ms:1000,muzzy_decay_ms:0"
# Debian/Ubuntu's libjemalloc2 (any architecture), the image's stable link, other distributions.
_CANDIDATES = (f"/usr/local/lib/{JEMALLOC}", f"/usr/lib/*-linux-gnu/{JEMALLOC}", f"/usr/lib64/{JEMALLOC}",
               f"/usr/lib/{JEMALLOC}")


def find_jemalloc() -> str | None:
    """The path of an installed jemalloc shared library, or None."""
    for pattern in _CANDIDATES:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def jemalloc_env(env: dict[str, str], library: str) -> dict[str, str]:
    """``env`` with ``library`` preloaded ahead of any preload already there, and ``MALLOC_CONF`` unless set."""
    preload = env.get("LD_PRELOAD", "")
    if library not in preload.split():
        preload = f"{library} {preload}".strip()
    return {"MALLOC_CONF": MALLOC_CONF, **env, "LD_PRELOAD": preload}


def with_malloc(env: dict[str, str], malloc: str) -> dict[str, str]:
    """``env`` for a process on ``malloc``: "jemalloc" preloads it (a ConfigError when it is not installed),
    "glibc" leaves the C library's."""
    if malloc == "glibc":
        return dict(env)
    if malloc != "jemalloc":
        raise ConfigError(f"malloc must be 'jemalloc' or 'glibc', not {malloc!r}")
    library = find_jemalloc()
    if library is None:
        raise ConfigError("jemalloc is not installed (Debian/Ubuntu: apt-get install libjemalloc2); the image "
                          "runs on it, so the soak does too (--malloc glibc measures glibc's malloc instead)")
    return jemalloc_env(env, library)


def allocator_of(pid: int | str = "self") -> str:
    """"jemalloc" when the process has jemalloc mapped (preloaded), else "glibc": logged at worker start and
    recorded by the soak, so a measurement says which allocator it measured."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return "unknown"
    return "jemalloc" if "libjemalloc" in maps else "glibc"


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (glibc >= 2.33): every field a size_t."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


class HeapReader:
    """The live heap (bytes the program holds from malloc, freed memory the allocator keeps excluded), read
    from the allocator this process runs on: jemalloc's ``stats.allocated`` (after an ``epoch`` write, which
    refreshes its cached statistics), or glibc's ``mallinfo2()`` in-use bytes (``uordblks`` in the arenas plus
    ``hblkhd`` mmapped). RSS also counts freed pages an allocator has not returned, which move in one-off steps
    of 10-22 MB on jemalloc; the live heap does not, so a leak shows in it.
    ``allocator`` is None when neither can be read (another malloc, or an old glibc): no value then."""

    def __init__(self) -> None:
        process = ctypes.CDLL(None)  # the global namespace: a preloaded jemalloc's symbols come first
        self.allocator: str | None = None
        mapped = allocator_of()
        if hasattr(process, "mallctl") and mapped == "jemalloc":
            self._mallctl = process.mallctl
            self._mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                                      ctypes.c_void_p, ctypes.c_size_t]
            self._mallctl.restype = ctypes.c_int
            if self._jemalloc("stats.allocated") is not None:  # None: built without statistics
                self.allocator = "jemalloc"
        elif hasattr(process, "mallinfo2") and mapped == "glibc":
            self._mallinfo2 = process.mallinfo2
            self._mallinfo2.argtypes = []
            self._mallinfo2.restype = _MallInfo2
            self.allocator = "glibc"

    def _jemalloc(self, name: str) -> int | None:
        epoch = ctypes.c_uint64(1)
        if self._mallctl(b"epoch", None, None, ctypes.byref(epoch), ctypes.sizeof(epoch)) != 0:
            return None
        value, size = ctypes.c_size_t(0), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
        if self._mallctl(name.encode(), ctypes.byref(value), ctypes.byref(size), None, 0) != 0:
            return None
        return int(value.value)

    def allocated(self) -> int | None:
        """Live heap bytes now, or None when this allocator cannot say."""
        if self.allocator == "jemalloc":
            return self._jemalloc("stats.allocated")
        if self.allocator == "glibc":
            info = self._mallinfo2()
            return int(info.uordblks + info.hblkhd)
        return None


def anon_resident_bytes(status: Path = Path("/proc/self/status")) -> float:
    """RssAnon of this process in bytes: cheap (one small /proc read), and it sees pymalloc's arenas, which
    CPython maps outside malloc (100,000 open conversations grew RSS by 225 MB and the heap by 18 MB). NaN
    where /proc is absent."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("RssAnon:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return math.nan


def export_anon(gauge: Gauge) -> None:
    """Have ``gauge`` read :func:`anon_resident_bytes` on every scrape."""
    gauge.set_function(anon_resident_bytes)


def export_heap(heap: Gauge, blocks: Gauge, reader: HeapReader | None = None) -> str | None:
    """Have ``heap`` (labelled by allocator) and ``blocks`` read the live heap and the interpreter's allocated
    blocks on every scrape; returns the allocator read, None when the heap cannot be read (``heap`` stays
    without a series rather than show a number that is not the heap)."""
    blocks.set_function(lambda: float(sys.getallocatedblocks()))
    reader = reader or HeapReader()
    if reader.allocator is None:
        return None

    def read() -> float:
        value = reader.allocated()
        return math.nan if value is None else float(value)  # NaN: a read that failed, never a made-up number

    heap.labels(reader.allocator).set_function(read)
    return reader.allocator
