"""A real `convmon worker` whose event loop blocks for ``STALL_S`` seconds once the file ``STALL_TRIGGER`` exists,
for the liveness test (tests/runtime/test_health.py).

Run as ``python -m tests.runtime.stall_worker`` with CONVMON_* settings. The heartbeat's tick sleeps synchronously
(``time.sleep``) before it records the tick, once: the whole loop stops (no fetch, no commit, no tick), as a
synchronous call on the loop would stop it, while the HTTP thread still answers the probes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from monitor.contracts.settings import load_settings
from monitor.runtime.health import Health
from monitor.runtime.worker import run_worker

_tick = Health.tick
stalled = False


def stalling_tick(self: Health) -> None:
    global stalled
    if not stalled and Path(os.environ["STALL_TRIGGER"]).exists():
        stalled = True
        time.sleep(float(os.environ.get("STALL_S", "8")))
    _tick(self)


if __name__ == "__main__":
    Health.tick = stalling_tick  # type: ignore[method-assign]
    run_worker(load_settings())
