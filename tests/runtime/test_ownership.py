"""Ownership: the hot path's indexes rebuilt once faust restored the tables, and the restore time exported
(``convmon_state_restore_seconds``): from the assignment to faust's rebalance-complete, plus the rebuild."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from types import SimpleNamespace
from typing import Any

from faust.types import TP
from prometheus_client import CollectorRegistry

from monitor.runtime.ownership import Ownership
from tests.support.hot_path import hot_path

Handler = Callable[..., Coroutine[Any, Any, None]]


class Signal:
    """faust's signal surface that Ownership uses: connect a handler, send to every handler."""

    def __init__(self) -> None:
        self.handlers: list[Handler] = []

    def connect(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def send(self, *args: object) -> None:
        for handler in self.handlers:
            asyncio.run(handler(self, *args))


def tps(partitions: set[int]) -> set[TP]:
    return {TP("rekeyed", p) for p in partitions}


def fake_app(assignment: set[TP]) -> SimpleNamespace:
    return SimpleNamespace(on_partitions_revoked=Signal(), on_rebalance_complete=Signal(),
                           on_partitions_assigned=Signal(), consumer=SimpleNamespace(assignment=lambda: assignment))


def ticks(*values: float) -> Callable[[], float]:
    it: Iterator[float] = iter(values)
    return lambda: next(it)


def restore_seconds(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("convmon_state_restore_seconds")


def test_restore_time_is_assignment_to_recovered_plus_the_rebuild_not_the_wait_between() -> None:
    hot, metrics = hot_path()
    registry = metrics.registry
    assignment = tps({0, 2})
    app = fake_app(assignment)
    # clock readings: assigned 10.0, complete 13.5, rebuild from 20.0 to 20.25; second rebalance: 30, 31, 40, 40.5
    ownership = Ownership(app, "rekeyed", hot, clock=ticks(10.0, 13.5, 20.0, 20.25, 30.0, 31.0, 40.0, 40.5))  # type: ignore[arg-type]
    assert restore_seconds(registry) == 0.0 and not ownership.ready
    app.on_partitions_assigned.send(assignment)
    app.on_rebalance_complete.send()
    assert ownership.ready and ownership.dirty and restore_seconds(registry) == 0.0  # not rebuilt yet
    ownership.refresh(hot)
    assert restore_seconds(registry) == 3.75 and hot.totals.owns(0) and hot.totals.owns(2)
    ownership.refresh(hot)  # nothing changed: no rebuild, no new sample
    assert restore_seconds(registry) == 3.75
    app.on_partitions_revoked.send(tps({2}))
    assert not ownership.ready and not hot.totals.owns(2)
    assignment -= tps({2})
    app.on_partitions_assigned.send(assignment)
    app.on_partitions_assigned.send(assignment)  # a second assignment before recovery completed: from the first
    app.on_rebalance_complete.send()
    ownership.refresh(hot)
    assert restore_seconds(registry) == 1.5 and hot.totals.owns(0) and not hot.totals.owns(2)
