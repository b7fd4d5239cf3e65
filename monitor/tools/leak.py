"""A deliberate, steady leak in a soak's worker (``convmon soak --inject-leak MB``): the positive control that
shows the soak's memory verdict can see a leak of that size at that run length (docs/reliability.md, "Soak").

Never imported by the worker itself: the soak starts its worker through ``BOOT`` only when asked.
"""

from __future__ import annotations

import threading
import time

CHUNK = 1024 - 33  # a bytes object of this length is one 1024-byte malloc (33 bytes of header and terminator)
BOOT = ("import runpy; from monitor.tools.leak import start; start({mb_per_min!r}); "
        "runpy.run_module('monitor.cli', run_name='__main__')")


def start(mb_per_min: float, *, tick_s: float = 1.0) -> list[bytes]:
    """Hold ``mb_per_min`` MiB more every minute (1 KiB objects, filled so their pages are resident, added every
    ``tick_s``) for the rest of the process, from a daemon thread; returns the list that holds them."""
    held: list[bytes] = []
    started = time.monotonic()

    def run() -> None:
        while True:
            due = int((time.monotonic() - started) / 60 * mb_per_min * 1024 * 1024 / 1024)
            held.extend(b"\x01" * CHUNK for _ in range(due - len(held)))
            time.sleep(tick_s)

    threading.Thread(target=run, name="soak-injected-leak", daemon=True).start()
    return held
