"""A real `convmon worker` whose event loop blocks on demand, for the liveness probe test.

Run as ``python -m tests.runtime.stall_worker`` with CONVMON_* settings and ``STALL_TRIGGER`` (a
path): when that file appears, a timer on the worker's loop deletes it and calls ``time.sleep``
for ``STALL_S`` seconds, the way a synchronous call on the loop would stall a production worker.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import faust

from monitor.contracts.settings import Settings, load_settings
from monitor.runtime.layout import BrokerLayout
from monitor.runtime.worker import build_worker_app, run_worker


def build(settings: Settings, layout: BrokerLayout) -> faust.App:
    app = build_worker_app(settings, layout)
    trigger = Path(os.environ["STALL_TRIGGER"])

    @app.timer(0.5)
    async def stall() -> None:
        if trigger.exists():
            trigger.unlink()
            time.sleep(float(os.environ.get("STALL_S", "8")))  # blocks the loop on purpose

    return app


if __name__ == "__main__":
    run_worker(load_settings(), build=build)
