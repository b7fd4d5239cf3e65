"""Workers reading a producer's input topic (any partition count), and what they scored, per conversation."""

from __future__ import annotations

import asyncio
from collections import Counter

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import decode_score
from monitor.contracts.settings import Settings
from monitor.runtime.broker import ensure_topics
from tests.support.model_fixtures import publish_distilled_model
from tests.support.readback import read_to_end

PARTITIONS = 4  # convmon's (CONVMON_TOPIC_PARTITIONS)


def input_worker(make_settings, broker: str, input_format: str, partitions: int) -> Settings:
    """Settings for a worker reading a producer's topic of ``partitions`` partitions, which exists (the
    producer's), with convmon's own topics and a live distilled model."""
    settings = make_settings(broker_url=f"kafka://{broker}", topic_partitions=PARTITIONS, sample_rate=0.0,
                             idle_timeout_s=3.0, registry_poll_s=1.0, input_format=input_format)
    settings = settings.model_copy(update={"input_topic": f"{settings.topic_prefix}otlp_spans"})
    publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
    asyncio.run(ensure_topics(broker, [settings.input_topic_name], partitions))
    return settings


def distilled_per_conversation(broker: str, settings: Settings) -> Counter[str]:
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    scores = [decode_score(r.value, rubric) for r in read_to_end(broker, settings.topic("scores")).records]
    return Counter(s.conversation_id for s in scores if s.scorer == "distilled")
