"""A writer's batch spans fetches until it is full, ``within_s`` after its first record, or a rebalance."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import TopicPartition

from monitor.engine.fetch import fetch_batch

TP, OTHER = TopicPartition("in", 0), TopicPartition("in", 1)


class Fetches:
    """getmany answering from a script, one answer a call, each after ``delay_s`` (an empty answer once done)."""

    def __init__(self, answers: list[dict[TopicPartition, list[int]]], delay_s: float = 0.01) -> None:
        self.answers, self.delay_s, self.calls = list(answers), delay_s, 0

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Any]]:
        self.calls += 1
        await asyncio.sleep(min(self.delay_s, timeout_ms / 1000))
        answer = self.answers.pop(0) if self.answers else {}
        return {tp: records[:max_records] for tp, records in answer.items()}


def fetch(consumer: Fetches, *, max_records: int = 100, within_s: float = 0.5,
          interrupted: Any = lambda: False) -> tuple[dict[TopicPartition, list[Any]], float]:
    started = time.monotonic()
    got = asyncio.run(fetch_batch(consumer, max_records=max_records, within_s=within_s,  # type: ignore[arg-type]
                                  interrupted=interrupted))
    return got, time.monotonic() - started


def test_records_of_several_fetches_within_the_window_are_one_batch() -> None:
    got, _ = fetch(Fetches([{TP: [1, 2]}, {OTHER: [7]}, {TP: [3]}]))
    assert got == {TP: [1, 2, 3], OTHER: [7]}


def test_a_full_batch_closes_at_once() -> None:
    consumer = Fetches([{TP: list(range(60))}, {TP: list(range(60, 120))}, {TP: [999]}])
    got, took = fetch(consumer, max_records=100, within_s=5.0)
    assert got == {TP: list(range(100))} and consumer.calls == 2 and took < 1.0


def test_the_window_closes_the_batch_from_its_first_record() -> None:
    consumer = Fetches([{TP: [1]}] + [{}] * 1000, delay_s=0.05)
    got, took = fetch(consumer, within_s=0.3)
    assert got == {TP: [1]} and 0.25 < took < 1.0


def test_an_empty_fetch_returns_at_once_and_a_rebalance_stops_the_batch() -> None:
    consumer = Fetches([])
    assert fetch(consumer)[0] == {} and consumer.calls == 1
    calls: list[int] = []

    def rebalanced() -> bool:
        calls.append(1)
        return len(calls) > 1

    consumer = Fetches([{TP: [1]}, {TP: [2]}, {TP: [3]}])
    assert fetch(consumer, interrupted=rebalanced)[0] == {TP: [1, 2]}
