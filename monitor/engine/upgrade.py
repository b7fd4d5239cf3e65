"""Switching a deployment from the faust engine: nothing open is lost, nothing judged twice.

The faust engine kept the same state under the same keys in its tables' changelogs (``<app_id>-sessions-changelog``
and ``<app_id>-scored-changelog``: JSON keys and values, partitioned as the state), and consumed every topic in the
group ``<app_id>``. This engine's groups are new (``<app_id>-writer``, ``-judge``, ``-labels``, ``-scores``: the
development broker never forgets a group's protocol, so the faust group cannot be joined with another assignor), so:

- the first restore of a partition that this engine never wrote takes that partition's faust changelogs (open
  sessions, dedup marks, totals) and logs them again in its own changelog, so conversations open at the switch
  go on and the exported totals continue. faust logged the totals as a transaction (a commit record per batch,
  each total with its value before the batch): :func:`settled` keeps what committed, in this engine's format;
- every group starts a partition it has no offset for where the faust group committed it: the input is not read
  again and retained judge records are not judged again;
- a worker refuses to start while the faust group has members (a deployment with both engines would count
  twice); the development broker never expires a group's members, so there the check is skipped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from monitor.contracts.errors import ConfigError
from monitor.engine.changelog import STORES
from monitor.stages.totals import COMMIT_PREFIX, GROUP_PREFIX

log = logging.getLogger(__name__)
FAUST_TABLES = {"sessions": STORES[0], "scored": STORES[1]}  # faust table -> this engine's store prefix


async def read_to_end(consumer: AIOKafkaConsumer, tp: TopicPartition, *, timeout_s: float) -> list[Any]:
    """Every record of ``tp`` up to the high watermark its fetches report (the development broker's ListOffsets
    answer can lag it); ``consumer`` has no group."""
    consumer.assign([tp])
    await consumer.seek_to_beginning(tp)
    out: list[Any] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        got = (await consumer.getmany(tp, timeout_ms=500)).get(tp, [])
        out += got
        high = consumer.highwater(tp)
        if not got and high is not None and await consumer.position(tp) >= high:
            break
    else:
        raise TimeoutError(f"{tp.topic}[{tp.partition}] not read to its end within {timeout_s:g}s")
    consumer.unsubscribe()
    return out


async def faust_state(consumer: AIOKafkaConsumer, app_id: str, partition: int, *,
                      timeout_s: float) -> dict[bytes, Any]:
    """The faust tables' state of one partition: store prefix + key -> value (last write wins)."""
    existing = await consumer.topics()
    state: dict[bytes, Any] = {}
    for table, prefix in FAUST_TABLES.items():
        tp = TopicPartition(f"{app_id}-{table}-changelog", partition)
        if tp.topic not in existing:
            continue
        values: dict[str, Any] = {}
        for record in await read_to_end(consumer, tp, timeout_s=timeout_s):
            key = str(orjson.loads(record.key))
            if record.value is None:
                values.pop(key, None)
            else:
                values[key] = orjson.loads(record.value)
        if table == "scored":
            values = settled(values)
        state.update((prefix + key.encode(), value) for key, value in values.items())
    return state


def settled(scored: dict[str, Any]) -> dict[str, Any]:
    """faust's ``scored`` table (key -> value) as this engine writes it, keeping only committed batches.

    faust's worker wrote a batch's dedup marks (``[time, partition, batch]``), its totals (each row ``[item, value,
    value before the batch]``, the group stamped with the batch), then the commit record ``#c|<partition>``. A
    crash could leave a batch without its commit record: its totals count with their value before it and its
    marks go, so the re-delivered input (faust committed no offset past that batch) is counted once, here."""
    committed = {int(v["partition"]): int(v["seq"]) for k, v in scored.items()
                 if k.startswith(COMMIT_PREFIX) and isinstance(v, dict)}
    out: dict[str, Any] = {}
    for key, value in scored.items():
        if key.startswith(COMMIT_PREFIX):
            continue
        if key.startswith(GROUP_PREFIX) and isinstance(value, list) and len(value) == 5:
            partition, family, shared, rows, batch = value
            kept = batch <= committed.get(partition, 0)
            out[key] = [partition, family, shared, [[item, now if kept else before] for item, now, before in rows]]
        elif ":" in key and isinstance(value, list) and len(value) == 3:  # a dedup mark
            if value[2] <= committed.get(value[1], 0):
                out[key] = value[:2]
        else:
            out[key] = value
    return out


class StartWhereFaustWas(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka's listener is an untyped ABC
    """A stateless loop's listener: partitions its own group never committed start at the faust group's offset."""

    def __init__(self, consumer: AIOKafkaConsumer, admin: AIOKafkaAdminClient, group: str, faust_group: str) -> None:
        self.consumer, self.admin, self.group, self.faust_group = consumer, admin, group, faust_group
        self.failure: BaseException | None = None  # aiokafka only logs a callback's exception: its loop raises it

    async def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        try:
            await self._seed(assigned)
        except Exception as exc:
            self.failure = exc

    async def _seed(self, assigned: Sequence[TopicPartition]) -> None:
        if not assigned:
            return
        own = await self.admin.list_consumer_group_offsets(self.group, partitions=list(assigned))
        fresh = [tp for tp in assigned if tp not in own or own[tp].offset < 0]
        if not fresh:
            return
        faust = await self.admin.list_consumer_group_offsets(self.faust_group, partitions=fresh)
        for tp in fresh:
            if tp in faust and faust[tp].offset >= 0:
                self.consumer.seek(tp, faust[tp].offset)
                log.info("%s: %s[%d] starts at offset %d, where the faust engine left it", self.group, tp.topic,
                         tp.partition, faust[tp].offset)


async def refuse_beside_faust(admin: AIOKafkaAdminClient, app_id: str, *, tansu: bool) -> None:
    """A ConfigError while faust workers of this deployment run (they would count the same input again)."""
    if tansu:
        log.info("development broker: not checking for faust workers of %s (it never expires a group's members)",
                 app_id)
        return
    described = await admin.describe_consumer_groups([app_id])
    members = [m for response in described for group in response.groups for m in group[5]]
    if members:
        raise ConfigError(f"{len(members)} faust worker(s) of {app_id} are still in the consumer group {app_id!r}: "
                          "stop every worker of the earlier release (the faust engine) before starting this one "
                          "(drain-then-switch, docs/architecture.md)")
