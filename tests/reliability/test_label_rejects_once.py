"""A NUL-byte conversation id with the PostgreSQL store: one dead letter for the conversation, not three.

Its label and its two score records (distilled and judge, with ``score_store``) are each refused by
PostgreSQL; each used to become a ``label_rejected`` dead letter.
"""

from __future__ import annotations

import asyncio

import orjson
from prometheus_client import CollectorRegistry

from distill.score_store import ScoreStore
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import encode_score
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings
from monitor.stages.labels import LabelSink, RejectedOnce
from tests.reliability.pg import label_message, pg_store

RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)


def score(cid: str, scorer: str) -> bytes:
    record = ScoreRecord(conversation_id=cid, scorer=scorer, judge="openai:test" if scorer == "llm" else "distilled",
                         rubric_set=RUBRIC.id, rubric_version=RUBRIC.version, model_version="m", R=8.0,
                         items=[ItemResult(item_id="sat.gratitude", polarity="sat", verdict=True, score=8.0)])
    return encode_score(record, RUBRIC)


def test_a_refused_conversation_is_dead_lettered_once_per_reason() -> None:
    metrics = Metrics(CollectorRegistry())
    once = RejectedOnce()
    with pg_store() as store:
        labels = LabelSink(store.upsert_raw, metrics, once=once)
        scores = LabelSink(ScoreStore(store, RUBRIC).upsert_raw, metrics, once=once)

        async def run() -> list[str]:
            letters = []
            for cid in ("nul\x00-0", "nul\x00-1"):
                key = cid.encode()
                letters += await scores.store([(key, score(cid, "distilled"))])  # the distilled score comes first
                letters += await labels.store([(key, orjson.dumps(label_message(cid))), (b"ok", orjson.dumps(
                    label_message("ok")))])
                letters += await scores.store([(key, score(cid, "llm")), (key, score(cid, "llm"))])
            return [bad.key.decode() + "/" + bad.reason for bad in letters if bad.key is not None]

        letters = asyncio.run(run())
        assert store.count() == 1  # the good label beside them is stored
    assert letters == ["nul\x00-0/label_rejected", "nul\x00-1/label_rejected"]
    assert metrics.registry.get_sample_value("convmon_label_store_rejected_repeats_total",
                                             {"reason": "label_rejected"}) == 6
