"""`convmon worker` on the checkpoint engine whose group refuses one offset commit: before the REFUSE_AT-th
checkpoint that produced a score record commits, the consumer's group generation is moved past the broker's, so the
broker answers the commit IllegalGeneration (as for a member the group moved on from) and aiokafka raises
CommitFailedError and rejoins. Once: REFUSE_MARK names a file left behind."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition

from monitor.cli import app
from monitor.engine.checkpoint import Checkpoint

AT, MARK = int(os.environ.get("REFUSE_AT", "3")), Path(os.environ["REFUSE_MARK"])
seen = 0
original_commit, original_commit_offsets = Checkpoint.commit, Checkpoint.commit_offsets


async def counting_commit(self: Checkpoint, delivery: Any, offsets: Any) -> None:
    global seen
    if delivery.scores:
        seen += 1
    await original_commit(self, delivery, offsets)


async def refused_once(self: Checkpoint, offsets: Mapping[TopicPartition, int]) -> None:
    if seen >= AT and offsets and not MARK.exists():
        MARK.write_text("refused")
        self.consumer._coordinator.generation += 100  # the broker's group is at another generation
    await original_commit_offsets(self, offsets)


Checkpoint.commit = counting_commit  # type: ignore[method-assign]
Checkpoint.commit_offsets = refused_once  # type: ignore[method-assign]

if __name__ == "__main__":
    app(["worker"])
