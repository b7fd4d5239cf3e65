"""Which malloc a worker runs on, and the environment that makes it jemalloc.

A worker under glibc malloc grows its resident memory in 8-12 MB steps that never come back (1-4.5 MB/min
in 10-minute soaks) while its live native heap stays flat (memray: +9 MB after warm-up against +36 MB of
RSS): the classify threads' numpy/scipy temporaries of varying sizes fragment glibc's arenas. Under
jemalloc, which returns dirty pages after a few seconds, the same soak is flat (docs/reliability.md,
"Soak"). The container image preloads it (``LD_PRELOAD``, Dockerfile); ``convmon soak`` starts its worker
the same way, so the soak measures what ships.
"""

from __future__ import annotations

import glob
from pathlib import Path

from monitor.contracts.errors import ConfigError

JEMALLOC = "libjemalloc.so.2"
# Freed pages go back to the system after 1 s instead of jemalloc's 10 s, so RSS stays closer to live memory.
# The soaks that validate the CI check ran with it; it did not, alone, let a 10-minute soak see an injected
# 1.5 MB/min leak (docs/reliability.md, "Soak"). The Dockerfile sets the same.
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
