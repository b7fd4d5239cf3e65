"""`convmon worker` on the checkpoint engine that kills itself (os._exit, as kill -9 would) right after one step
of one checkpoint: CRASH_STEP (produce, log_state, flush, commit_offsets, or export: after the offsets, before the
totals are exported) of the CRASH_AT-th checkpoint that produced a score record; once: CRASH_MARK names a file
the crash leaves behind, and a worker that finds it runs as usual (its supervisor's restart)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from monitor.cli import app
from monitor.engine.checkpoint import Checkpoint

STEP, AT, MARK = os.environ["CRASH_STEP"], int(os.environ.get("CRASH_AT", "3")), Path(os.environ["CRASH_MARK"])
seen = 0


def crash() -> None:
    MARK.write_text(STEP)
    os._exit(9)


def crash_after(name: str) -> None:
    step: Callable[..., Awaitable[Any]] = getattr(Checkpoint, name)

    async def wrapped(self: Checkpoint, *args: Any) -> Any:
        out = await step(self, *args)
        if seen >= AT and name == STEP:
            crash()
        return out

    setattr(Checkpoint, name, wrapped)


original_commit = Checkpoint.commit


async def counting_commit(self: Checkpoint, delivery: Any, offsets: Any) -> None:
    global seen
    if delivery.scores:
        seen += 1
    await original_commit(self, delivery, offsets)
    if seen >= AT and STEP == "export":  # after commit_offsets and the export: the totals already shown
        crash()


if not MARK.exists():
    Checkpoint.commit = counting_commit  # type: ignore[method-assign]
    for name in ("produce", "log_state", "flush", "commit_offsets"):
        crash_after(name)

if __name__ == "__main__":
    app(["worker"])
