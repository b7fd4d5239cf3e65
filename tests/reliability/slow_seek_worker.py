"""A real `convmon worker` whose committed-offset lookups take ``SEEK_DELAY_S`` longer, for the seek race test
(tests/reliability/test_seek_race.py).

Run as ``python -m tests.reliability.slow_seek_worker`` with CONVMON_* settings. The writer reads its group's
committed offsets (OffsetFetch, through the admin client) after every assignment and only then seeks and resumes
its partitions; here that answer comes ``SEEK_DELAY_S`` late, as from a loaded broker, while records keep arriving.
With ``NO_OFFSET_COMMITS=1`` it commits no input offset (it still writes its changelog): a worker killed before
its first commit.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiokafka
from aiokafka.admin import AIOKafkaAdminClient

from monitor.contracts.settings import load_settings
from monitor.runtime.worker import run_worker

_list_offsets = AIOKafkaAdminClient.list_consumer_group_offsets


async def slow_list_offsets(self: AIOKafkaAdminClient, *args: Any, **kwargs: Any) -> Any:
    committed = await _list_offsets(self, *args, **kwargs)
    await asyncio.sleep(float(os.environ.get("SEEK_DELAY_S", "3")))
    return committed


async def no_commit(self: aiokafka.AIOKafkaConsumer, offsets: Any = None) -> None:
    return None


if __name__ == "__main__":
    AIOKafkaAdminClient.list_consumer_group_offsets = slow_list_offsets  # type: ignore[method-assign]
    if os.environ.get("NO_OFFSET_COMMITS") == "1":
        aiokafka.AIOKafkaConsumer.commit = no_commit  # type: ignore[method-assign]
    run_worker(load_settings())
