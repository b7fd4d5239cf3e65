"""How long convmon keeps conversation data, and ``convmon forget``: erasure from every store it owns.

Retention: labels older than ``label_retention_days`` are purged by the leader every hour (and
before each retraining); score records and dead letters live in Kafka topics whose
``retention.ms`` convmon sets (``retention_events_s``, ``retention_scores_s``,
``retention_dead_letters_s``) when it creates them (``monitor.runtime.topics``).

Erasure: the label store is the only store convmon owns that is keyed by conversation (the model
registry holds weights and manifests, no conversation data; the judge budget holds one row per
day). Kafka topics are append-only logs: a conversation stays in them until retention expires,
and ``forget`` says which topics, for how long.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import faust

from monitor.contracts.settings import DistillSettings, KafkaSettings, RubricSettings
from monitor.runtime.topics import convmon_topics

log = logging.getLogger(__name__)
DAY_MS = 86_400_000
PURGE_INTERVAL_S = 3600.0
_SOURCES = {  # topic -> what of a conversation it holds
    "events": "the raw turn and end events",
    "judge": "conversations sent to the judge (text)",
    "scores": "score records (id, verdicts, metadata)",
    "labels": "judged conversations (text) on their way to the label store",
    "dead-letters": "rejected input and failed records (bytes)",
}


def register_retention(app: faust.App, store: object, retention_days: int) -> None:
    """Purge labels past retention every hour on the leader, whether or not retraining runs."""

    @app.timer(PURGE_INTERVAL_S, on_leader=True)
    async def purge_labels() -> None:
        try:
            deleted = await asyncio.get_running_loop().run_in_executor(
                None, lambda: store.purge(older_than_days=retention_days))  # type: ignore[attr-defined]
        except Exception as exc:  # the store may be down: the next tick tries again
            log.warning("label retention purge failed (retrying in %.0fs): %s", PURGE_INTERVAL_S, exc)
            return
        if deleted:
            log.info("label retention: purged %d labels older than %d days", deleted, retention_days)


@dataclass(frozen=True)
class ForgetReport:
    deleted_labels: int
    topics: list[tuple[str, str, str]]  # (topic, what it holds, how long it keeps it)
    deleted_scores: int = 0  # rows of <prefix>score_items (drill-down, no text)

    def lines(self, ids: list[str]) -> list[str]:
        out = [f"label store: deleted {self.deleted_labels} label rows for {len(ids)} conversation id(s)",
               f"score items: deleted {self.deleted_scores} rows",
               "model registry: holds no per-conversation data (weights and manifests only); models trained "
               "on these labels forget them at the next retraining",
               "judge budget ledger: holds no per-conversation data (one row per UTC day)",
               "still in Kafka until retention expires (topics are append-only logs):"]
        out += [f"  {topic}: {what}; {keep}" for topic, what, keep in self.topics]
        return out


def forget(kafka: KafkaSettings, distill: DistillSettings, rubrics: RubricSettings,
           conversation_ids: list[str]) -> ForgetReport:
    """Delete the conversations from the label store; list the topics that keep them until retention."""
    from distill.score_store import ScoreStore
    from distill.store import LabelStore
    from monitor.contracts.rubric_set import load_rubric_set

    store = LabelStore.from_settings(distill)
    try:
        deleted = store.delete_conversations(conversation_ids)
        scores = ScoreStore(store, load_rubric_set(rubrics.rubric_set, rubrics.prompts_dir))
        deleted_scores = scores.delete_conversations(conversation_ids)  # the table exists even if the sink is off
    finally:
        store.close()
    configured = {spec.name: spec.config for spec in convmon_topics(kafka)}
    topics = []
    for name, what in _SOURCES.items():
        topic = kafka.topic(name)
        ms = configured.get(topic, {}).get("retention.ms")
        keep = f"retention.ms={ms} ({int(ms) / DAY_MS:g} days)" if ms else "the cluster's default retention"
        topics.append((topic, what, keep))
    topics.append((f"{kafka.app_id}-sessions-changelog", "open conversations' turns (text)",
                   "compacted: until the conversation's tombstone is compacted away"))
    topics.append((f"{kafka.app_id}-scored-changelog", "conversation ids (de-duplication window)",
                   "compacted: until the window entry is deleted"))
    return ForgetReport(deleted, topics, deleted_scores)
