"""`convmon labels consume --topic T`: human labels from a Kafka topic of feedback (the embedded broker), stored
once committed; a message that is no label goes to the dead-letter topic with its reason."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from distill.human_labels import HumanLabelStore
from distill.store import LabelStore
from monitor.contracts.settings import REPO_ROOT
from monitor.runtime.broker import ensure_topics
from monitor.tools.dead_letters import read_letters
from tests.review.stored import ITEM
from tests.support.topic_io import produce

pytestmark = pytest.mark.integration


def test_labels_from_a_topic_and_bad_ones_dead_lettered(broker: str, make_settings, tmp_path: Path) -> None:
    settings = make_settings(broker_url=f"kafka://{broker}")
    topic = f"{settings.topic_prefix}feedback"
    asyncio.run(ensure_topics(broker, [topic, settings.topic("dead-letters")], 2))
    good = [{"conversation_id": f"c-{k}", "item_id": ITEM, "answer": "yes" if k % 2 else "no"} for k in range(3)]
    bad = [b"{not json", orjson.dumps({"conversation_id": "c-9", "item_id": ITEM, "answer": "maybe"})]
    produce(broker, topic, [(f"c-{k}".encode(), orjson.dumps(v)) for k, v in enumerate(good)]
            + [(b"bad", raw) for raw in bad])
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env.update(CONVMON_BROKER_URL=settings.broker_url, CONVMON_TOPIC_PREFIX=settings.topic_prefix,
               CONVMON_APP_ID=settings.app_id, CONVMON_LABEL_STORE_URL=settings.label_store_url,
               PYTHONPATH=str(REPO_ROOT))
    argv = [sys.executable, "-m", "monitor.cli", "labels", "consume", "--topic", topic, "--until-end"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"topic": topic, "stored": 3, "dead_lettered": 2}
    store = LabelStore(settings.label_store_url)
    labels = {h.conversation_id: (h.answer, h.source) for h in HumanLabelStore(store).fetch()}
    store.close()
    assert labels == {"c-0": ("no", "feedback"), "c-1": ("yes", "feedback"), "c-2": ("no", "feedback")}
    letters = asyncio.run(read_letters(settings.kafka, last=None, reference=lambda key: key))
    assert sorted((x.reason, x.stage) for x in letters) == [("label_rejected", "human_labels")] * 2
    assert any("field 'answer'" in x.detail for x in letters) and any("not JSON" in x.detail for x in letters)
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)  # committed: nothing new
    assert json.loads(again.stdout) == {"topic": topic, "stored": 0, "dead_lettered": 0}
