"""A real `convmon worker` whose seeks to the committed offsets take ``SEEK_DELAY_S`` longer, for the seek
race test (tests/reliability/test_seek_race.py).

Run as ``python -m tests.reliability.slow_seek_worker`` with CONVMON_* settings. aiokafka's
``seek_to_committed`` (what faust's ``perform_seek`` awaits after every assignment) sleeps after seeking,
before it returns: as when OffsetFetch answers come slowly and aiokafka seeks the partitions one by one,
the first ones are back at their committed offsets and fetching long before faust sets its read offsets
back (what lost conversations in the kill -9 fault, #18). With ``NO_OFFSET_COMMITS=1`` it commits no input
offset (it still writes its tables): a worker killed before its first commit.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiokafka

from monitor.contracts.settings import load_settings
from monitor.runtime.worker import run_worker

_seek_to_committed = aiokafka.AIOKafkaConsumer.seek_to_committed


async def slow_seek_to_committed(self: aiokafka.AIOKafkaConsumer, *partitions: Any) -> Any:
    committed = await _seek_to_committed(self, *partitions)
    await asyncio.sleep(float(os.environ.get("SEEK_DELAY_S", "3")))
    return committed


async def no_commit(self: aiokafka.AIOKafkaConsumer, offsets: Any = None) -> None:
    return None


if __name__ == "__main__":
    aiokafka.AIOKafkaConsumer.seek_to_committed = slow_seek_to_committed  # type: ignore[method-assign]
    if os.environ.get("NO_OFFSET_COMMITS") == "1":
        aiokafka.AIOKafkaConsumer.commit = no_commit  # type: ignore[method-assign]
    run_worker(load_settings())
