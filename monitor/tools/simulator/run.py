"""Drive the generator in real time: conversations start at ``rate`` per second and their turns
arrive interleaved with other conversations', ``turn_gap_s`` apart, as a chat app would log them."""

from __future__ import annotations

import asyncio
import heapq
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.settings import KafkaSettings
from monitor.runtime.produce import make_producer, send_event, start_producer
from monitor.tools.simulator.generate import ConversationGenerator


@dataclass
class SimulationStats:
    conversations: int = 0
    events: int = 0
    truth_counts: dict[str, int] = field(default_factory=dict)
    spiked_conversations: int = 0


@dataclass(frozen=True)
class SimulationPlan:
    rate: float = 5.0
    duration_s: float = 60.0
    turn_gap_s: float = 0.2
    dsat_spike_at_s: float | None = None
    spike_factor: float = 4.0
    idle_fraction: float = 0.0  # share of conversations with no end event (finished by idle timeout)
    seed: int = 0
    mix: dict[str, float] | None = None


async def simulate(kafka: KafkaSettings, rubric: RubricSet, plan: SimulationPlan,
                   stop: asyncio.Event | None = None) -> SimulationStats:
    generator = ConversationGenerator(rubric, mix=plan.mix, seed=plan.seed)
    rng = random.Random(plan.seed + 1)
    topic = kafka.input_topic_name
    stats = SimulationStats()
    queue: list[tuple[float, int, dict[str, Any]]] = []
    seq = 0
    producer = make_producer(kafka)
    await start_producer(kafka, producer)
    started = time.monotonic()
    next_start = started
    try:
        while True:
            now = time.monotonic()
            elapsed = now - started
            running = elapsed < plan.duration_s and not (stop and stop.is_set())
            while running and next_start <= now:
                spiking = plan.dsat_spike_at_s is not None and elapsed >= plan.dsat_spike_at_s
                conv = generator.generate(
                    f"sim-{uuid.uuid4().hex[:16]}", time.time(),
                    dsat_factor=plan.spike_factor if spiking else 1.0,
                    end_event=rng.random() >= plan.idle_fraction,
                )
                stats.conversations += 1
                stats.spiked_conversations += spiking
                for item in conv.truth:
                    stats.truth_counts[item] = stats.truth_counts.get(item, 0) + 1
                for i, event in enumerate(conv.events):
                    heapq.heappush(queue, (next_start + i * plan.turn_gap_s, seq, event))
                    seq += 1
                next_start += 1.0 / plan.rate
            while queue and queue[0][0] <= now:
                await send_event(producer, topic, heapq.heappop(queue)[2])
                stats.events += 1
            if not running and not queue:
                break
            wake = min([queue[0][0]] if queue else [] + ([next_start] if running else []) or [now + 0.05])
            await asyncio.sleep(max(0.0, min(wake - time.monotonic(), 0.1)))
        await producer.flush()
    finally:
        await producer.stop()
    return stats
