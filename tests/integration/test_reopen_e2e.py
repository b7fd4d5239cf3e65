"""A conversation the user comes back to, on the real broker with a worker: the come-back
turn reopens it, the new revision is scored again by both scorers (revision on the scores topic), the exported
totals count every conversation once by its latest revision, and a turn past the reopen window is dead-lettered
``late_event`` with its reason."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import SCORE_ID_HEADER, decode_score
from monitor.contracts.settings import Settings
from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from monitor.runtime.produce import produce_events
from monitor.runtime.scrape import total
from monitor.tools.simulator.generate import SimConversation
from tests.support.model_fixtures import publish_distilled_model
from tests.support.traffic import conversations, produce, read_topic
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration
WINDOW_S = 40.0


def come_back(conv: SimConversation, times: int, truth: list[str]) -> list[dict[str, Any]]:
    """The user's ``times``-th return: a user turn, the assistant's answer and an end."""
    turns = [e for e in conv.events if e["type"] == "turn"]
    n, ts = len(turns) + 2 * (times - 1), float(turns[-1]["timestamp"]) + 60.0 * times
    cid = conv.conversation_id
    return [{"type": "turn", "conversation_id": cid, "turn_index": n, "role": "user", "text": "this is still wrong",
             "timestamp": ts},
            {"type": "turn", "conversation_id": cid, "turn_index": n + 1, "role": "assistant",
             "text": "Sorry, let me try again.", "timestamp": ts + 1},
            {"type": "end", "conversation_id": cid, "timestamp": ts + 2, "simulated_truth": truth}]


def revisions(broker: str, settings: Settings) -> dict[tuple[str, str], set[int]]:
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    out: dict[tuple[str, str], set[int]] = defaultdict(set)
    for r in read_topic(broker, settings.topic("scores")):
        score = decode_score(r.value, rubric)
        assert dict(r.headers)[SCORE_ID_HEADER].decode().endswith("" if score.revision == 1 else f"#r{score.revision}")
        out[(score.scorer, score.conversation_id)].add(score.revision)
    return out


def test_a_returning_user_is_scored_again_and_counted_once(broker: str, make_settings, tmp_path: Path) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0,
                             idle_timeout_s=30.0, registry_poll_s=1.0, reopen_window_s=WINDOW_S)
    publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    convs = conversations(settings, "back", 6, seed=54)
    ids = [c.conversation_id for c in convs]
    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        produce(settings, convs)
        wait_until(lambda: all(1 in revisions(broker, settings).get(("distilled", i), set()) for i in ids), 120,
                   interval=1.0, message="every conversation scored")
        closed_at = time.time()  # after every first close
        asyncio.run(produce_events(settings.kafka, [e for c in convs[:3] for e in come_back(c, 1, ["sat.gratitude"])]))
        wait_until(lambda: all(2 in revisions(broker, settings).get((s, i), set()) for s in ("distilled", "llm")
                               for i in ids[:3]), 60, interval=1.0, message="revision 2 of the three scored by both")
        asyncio.run(produce_events(settings.kafka, come_back(convs[0], 2, [])))
        wait_until(lambda: all({1, 2, 3} <= revisions(broker, settings).get((s, ids[0]), set())
                               for s in ("distilled", "llm")), 60, interval=1.0, message="revision 3 judged")
        seen = revisions(broker, settings)
        assert {i: max(seen[("distilled", i)]) for i in ids} == dict(zip(ids, [3, 2, 2, 1, 1, 1], strict=True))

        def counted_once() -> bool:
            samples = worker.samples()
            return all(total(samples, "convmon_partition_conversations_scored_total", scorer=s)
                       - total(samples, "convmon_partition_conversations_scored_retracted_total", scorer=s) == 6
                       for s in ("distilled", "llm"))

        wait_until(counted_once, 30, interval=1.0, message="the exported totals count each conversation once")
        samples = worker.samples()
        assert total(samples, "convmon_partition_conversations_scored_retracted_total", scorer="distilled") == 4
        assert total(samples, "convmon_conversations_reopened_total") == 4

        # past the window: a late event, dead-lettered with its reason, never a new conversation
        time.sleep(max(0.0, closed_at + WINDOW_S + 2.0 - time.time()))
        late = come_back(convs[5], 1, [])[:1]
        asyncio.run(produce_events(settings.kafka, late))

        def dead_lettered() -> list[Any]:
            return [r for r in read_topic(broker, settings.topic("dead-letters")) if r.key == ids[5].encode()]

        wait_until(lambda: bool(dead_lettered()), 60, interval=1.0, message="the late turn dead-lettered")
        headers = {k: bytes(v).decode() for k, v in dead_lettered()[0].headers}
        assert "late_event" in headers.values(), headers
        assert any("past the 40 s reopen window" in v for v in headers.values()), headers
        assert max(revisions(broker, settings)[("distilled", ids[5])]) == 1
        assert worker.alive(), worker.log()
