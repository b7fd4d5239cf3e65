"""Counting Prometheus can trust, on the real broker with real worker processes.

A worker is killed with -9 while it scores a stream; a new worker takes every partition over. The
per-partition running totals it exports must equal the truth (every conversation counted once per
scorer: nothing the killed worker counted since its last scrape lost, nothing counted twice), and no
partition's total may be below what Prometheus last scraped from the killed worker (so the recorded
``max without (instance)`` series never decreases).

This test found that the embedded broker's ListOffsets answer ends inside the last record batch, so the
new owner restored a prefix of the killed worker's last batch (its totals without its commit record) and
dropped that batch's counts; restores now end where a fetch says the log ends (monitor/runtime/log_ends.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import orjson
import pytest

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import Sample, by_label, total
from monitor.tools.simulator.generate import SimConversation
from tests.support.model_fixtures import publish_distilled_model
from tests.support.traffic import conversations, produce, read_topic
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration
PARTITION_SCORED = "convmon_partition_conversations_scored_total"


def diagnose(broker: str, settings: Settings, convs: list[SimConversation]) -> str:
    """For a failure: the conversations without a distilled score on the topic, and what the changelog kept."""
    scored = {(orjson.loads(r.value)["scorer"], r.key.decode()) for r in read_topic(broker, settings.topic("scores"))
              if r.value}
    missing = [c.conversation_id for c in convs if ("distilled", c.conversation_id) not in scored]
    log = [(orjson.loads(r.key), r.value and orjson.loads(r.value))
           for r in read_topic(broker, f"{settings.app_id}-scored-changelog")]
    marks = [(k, v) for k, v in log if any(k.endswith(f":{m}") for m in missing)]
    commits = [(k, v) for k, v in log if k.startswith("#c")]
    return f"missing distilled scores {missing}; their marks {marks}; commits {commits[-12:]}"


def per_partition(samples: list[Sample], scorer: str) -> dict[str, float]:
    return by_label(samples, PARTITION_SCORED, "partition", scorer=scorer)


def test_kill_9_then_the_new_owner_exports_totals_equal_to_the_truth(broker: str, make_settings,
                                                                    tmp_path: Path) -> None:
    n = 40
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=3.0,
                             registry_poll_s=1.0)
    publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    convs = conversations(settings, "totals", n, seed=5)

    a = WorkerProcess(settings, tmp_path / "a.log").start()
    produce(settings, convs[:10])
    wait_until(lambda: total(a.samples(), PARTITION_SCORED, scorer="distilled") >= 10, 90,
               message="the warm-up counted in the partition totals")
    feeder = threading.Thread(target=produce, args=(settings, convs[10:], 0.1))
    feeder.start()
    a_last: list[Sample] = []
    try:
        def part_counted() -> bool:
            nonlocal a_last
            a_last = a.samples()
            return total(a_last, PARTITION_SCORED, scorer="distilled") >= 16

        wait_until(part_counted, timeout=90, interval=0.1, message="part of the stream counted before the kill")
        a.kill()
    finally:
        feeder.join()
    assert total(a_last, PARTITION_SCORED, scorer="distilled") < n, "the kill came too late to be mid-stream"
    # the killed worker's per-worker counter agrees with its partition totals up to unacknowledged commits
    assert total(a_last, "convmon_conversations_scored_total", scorer="distilled") >= total(
        a_last, PARTITION_SCORED, scorer="distilled")

    with WorkerProcess(settings, tmp_path / "b.log") as b:
        b_last: list[Sample] = []

        def all_counted() -> bool:
            nonlocal b_last
            b_last = b.samples()
            return all(total(b_last, PARTITION_SCORED, scorer=s) >= n for s in ("distilled", "llm"))

        try:
            wait_until(all_counted, timeout=180, interval=1.0, message="every conversation in B's partition totals")
        except AssertionError as exc:
            seen = {s: (per_partition(a_last, s), per_partition(b_last, s),
                        total(b_last, "convmon_conversations_scored_total", scorer=s),
                        total(b_last, "convmon_duplicate_scores_total", scorer=s)) for s in ("distilled", "llm")}
            raise AssertionError(f"{exc}; per scorer (A's last, B's partition totals, B's own count, B's "
                                 f"duplicates): {seen}; {diagnose(broker, settings, convs)}") from None
        time.sleep(3)  # a second count of anything would show now
        final = b.samples()
        assert b.alive()
        log = b.log_path.read_text(errors="replace")
        assert "Crashed reason" not in log, b.log()

    for scorer in ("distilled", "llm"):
        assert total(final, PARTITION_SCORED, scorer=scorer) == n, scorer  # the truth: each counted once
        owned = per_partition(final, scorer)
        assert len(owned) == settings.topic_partitions  # B owns every partition now
        for partition, scraped in per_partition(a_last, scorer).items():
            assert owned[partition] >= scraped, (scorer, partition)  # never below a scrape of the killed worker
