"""How long convmon keeps conversation data, and ``convmon forget``: erasure from every store it owns.

Retention: labels older than ``label_retention_days`` are purged every hour by the worker that writes state partition 0
(monitor/engine/worker.py), and before each retraining; score records and dead letters live in Kafka topics whose
``retention.ms`` convmon sets (``retention_events_s``, ``retention_scores_s``, ``retention_dead_letters_s``) when it
creates them (``monitor.runtime.topics``).

Erasure: the label store and the score items beside it are the stores convmon owns that are keyed by
conversation (the model registry holds weights and manifests, no conversation data; the judge budget
holds one row per day). ``forget`` takes conversation ids or their opaque references (the exemplars'
``conversation_ref``, resolved through the score items). Kafka topics are append-only logs, and
Prometheus keeps exemplars (which carry references, never ids) until its own retention: ``forget``
says which of those still hold the conversation, for how long (docs/security.md: the Kafka-side steps).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from pydantic import SecretStr

from monitor.contracts.settings import DistillSettings, KafkaSettings, RubricSettings
from monitor.runtime.topics import STATE_CHANGELOG, convmon_topics

log = logging.getLogger(__name__)
DAY_MS = 86_400_000
PURGE_INTERVAL_S = 3600.0
_SOURCES = {  # topic -> what of a conversation it holds
    "events": "the producer's input records (raw: convmon only reads this topic)",
    "rekeyed": "input events re-produced under their conversation id (redacted unless pii_raw_internal_topics)",
    "judge": "conversations sent to the judge (text, redacted unless pii_raw_internal_topics)",
    "verdicts": "the judge's verdicts (score records: item verdicts, explanations, redacted metadata)",
    "scores": "score records (id, verdicts, redacted metadata)",
    "labels": "judged conversations (text, redacted unless pii_raw_internal_topics) on their way to the label store",
    "dead-letters": "rejected input and failed records (redacted unless dead_letter_raw)",
}


async def purge_once(store: object, retention_days: int, scores: object | None) -> None:
    """One retention pass; a store that is down is logged and tried again at the next tick."""
    loop = asyncio.get_running_loop()
    try:
        deleted = await loop.run_in_executor(
            None, lambda: store.purge(older_than_days=retention_days))  # type: ignore[attr-defined]
        if deleted:
            log.info("label retention: purged %d labels older than %d days", deleted, retention_days)
        if scores is not None:
            purged = await loop.run_in_executor(None, scores.purge)  # type: ignore[attr-defined]
            if purged:
                log.info("score retention: purged %d score items", purged)
    except Exception as exc:  # the store may be down: the next tick tries again
        log.warning("retention purge failed (retrying in %.0fs): %s", PURGE_INTERVAL_S, exc)


@dataclass(frozen=True)
class ForgetReport:
    deleted_labels: int
    topics: list[tuple[str, str, str]]  # (topic, what it holds, how long it keeps it)
    deleted_scores: int = 0  # rows of <prefix>score_items (drill-down, no text)
    deleted_anchors: int = 0  # rows of the anchor sets (redacted text, human labels), every version
    ids: tuple[str, ...] = ()  # the conversation ids erased (references resolved)
    references: tuple[tuple[str, str], ...] = ()  # (conversation id, its reference)
    unresolved: tuple[str, ...] = ()  # references no score item names: nothing known to erase for them

    def as_json(self) -> dict[str, object]:
        """``convmon forget``'s stdout: what was removed, and what could not be (topics, Prometheus)."""
        return {
            "conversation_ids": list(self.ids),
            "references": {cid: ref for cid, ref in self.references},
            "unresolved_references": list(self.unresolved),
            "removed": {"labels": self.deleted_labels, "score_items": self.deleted_scores,
                        "anchors": self.deleted_anchors},
            "not_removed": [*({"store": "kafka", "topic": t, "holds": what, "kept": keep}
                              for t, what, keep in self.topics),
                            {"store": "prometheus", "holds": "exemplars with these references (no ids, no text)",
                             "kept": "Prometheus's TSDB retention (exemplar storage is in memory and WAL)"}],
        }

    def lines(self, ids: list[str]) -> list[str]:
        out = [f"label store: deleted {self.deleted_labels} label rows for {len(ids)} conversation id(s)",
               f"score items: deleted {self.deleted_scores} rows",
               f"anchor sets: deleted {self.deleted_anchors} anchors (with their re-judged verdicts)",
               "model registry: holds no per-conversation data (weights and manifests only); models trained "
               "on these labels forget them at the next retraining",
               "judge budget ledger: holds no per-conversation data (one row per UTC day)",
               "still in Kafka until retention expires (topics are append-only logs):"]
        out += [f"  {topic}: {what}; {keep}" for topic, what, keep in self.topics]
        return out


def forget(kafka: KafkaSettings, distill: DistillSettings, rubrics: RubricSettings,
           conversation_ids: list[str], *, reference_key: SecretStr | None = None) -> ForgetReport:
    """Delete the conversations (ids, or references resolved through the score items) from the label store
    and the score items; list the topics that keep them until retention."""
    from distill.anchor_store import AnchorStore
    from distill.human_labels import HumanLabelStore
    from distill.reference_key import conversation_ref
    from distill.score_store import ScoreStore
    from distill.store import LabelStore
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.judge.reference import is_reference

    store = LabelStore.from_settings(distill)
    try:
        scores = ScoreStore(store, load_rubric_set(rubrics.rubric_set, rubrics.prompts_dir))
        asked_refs = [c for c in conversation_ids if is_reference(c)]
        resolved = scores.resolve(asked_refs) if asked_refs else {}
        ids = list(dict.fromkeys([c for c in conversation_ids if not is_reference(c)] + list(resolved.values())))
        deleted = store.delete_conversations(ids) if ids else 0
        deleted_scores = scores.delete_conversations(ids) if ids else 0  # the table exists even if the sink is off
        if ids:  # reviewers' labels of these conversations (convmon ui, convmon labels import)
            HumanLabelStore(store).delete_conversations(ids)
        ref = conversation_ref(reference_key, store)
        deleted_anchors = AnchorStore(store).forget([ref(c) for c in ids] + asked_refs)  # keyed by reference
    finally:
        store.close()
    configured = {spec.name: spec.config for spec in convmon_topics(kafka)}
    topics = []
    for name, what in _SOURCES.items():
        topic = kafka.input_topic_name if name == "events" else kafka.topic(name)
        ms = configured.get(topic, {}).get("retention.ms")
        keep = f"retention.ms={ms} ({int(ms) / DAY_MS:g} days)" if ms else "the cluster's default retention"
        topics.append((topic, what, keep))
    topics.append((f"{kafka.app_id}-{STATE_CHANGELOG}-changelog",
                   "open conversations' turns (text, redacted by default) and conversation ids (de-duplication "
                   "window)", "compacted: until the conversation's and the window entry's tombstones are compacted "
                   "away"))
    return ForgetReport(deleted, topics, deleted_scores, deleted_anchors=deleted_anchors, ids=tuple(ids),
                        references=tuple((cid, ref(cid)) for cid in ids),
                        unresolved=tuple(r for r in asked_refs if r not in resolved))
