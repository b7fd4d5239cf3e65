"""Anchor sets from the human labels people made: the review page's answers and ``convmon labels import``.

A conversation becomes an anchor when it has at least one human answer on an item of the current rubric and
the label store still holds its text (the judge's labelled row, redacted as the worker stored it, redacted
again here with the configured rules). Each answer becomes the anchor's human verdict on that item (``yes`` is
True, ``no`` False); the overall SAT / DSAT answer is no rubric item, so the judge never scores it and it is
left out. Every conversation that cannot become an anchor is counted under its reason, never dropped silently.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError

from distill.anchor_store import Anchor
from distill.human_labels import OVERALL, HumanLabel, HumanLabelStore
from distill.store import LabelStore
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import RubricSet
from monitor.judge.redact import Redactor
from monitor.judge.reference import is_reference

# Below this, the drift test can hardly fire: with 40 anchors a judge change that flips 30 % of an item's
# verdicts (judge noise 5 %, CONVMON_ANCHORS_ALPHA=0.01 over 20 items) is found in 22 of 40 simulated seeds,
# with 50 in 30 of 40, with 80 in 38 of 40 (tests/tools/test_anchors_from_labels.py measures it).
MIN_ANCHORS = 50
DEFAULT_MAX = 500  # a few hundred anchors: every one is a judge call at every run
CHUNK = 500  # ids per IN (...) query: SQLite's bound-parameter limit is far above

SKIP_REASONS = {
    "no_text": "no judged conversation with that id in the label store (never judged, or purged after "
               "CONVMON_LABEL_RETENTION_DAYS)",
    "reference_id": "labelled under its reference (ref-...) instead of the conversation id",
    "unreadable": "its stored turns do not validate as a conversation",
    "only_overall": "only an overall SAT/DSAT answer, no rubric item",
    "not_in_rubric": "answers only on items the current rubric does not have",
    "over_max": "beyond --max-anchors (the most recently labelled are kept)",
}


@dataclass
class HumanAnchors:
    """The anchors built, and what was left out and why."""

    anchors: list[Anchor]
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> conversations
    items: dict[str, dict[str, int]] = field(default_factory=dict)  # item -> {"yes": n, "no": n}

    def skipped_text(self) -> str:
        total = sum(self.skipped.values())
        if not total:
            return "skipped none"
        parts = [f"{n} {SKIP_REASONS[reason]}" for reason, n in sorted(self.skipped.items())]
        return f"skipped {total}: " + "; ".join(parts)


def stored_conversations(labels: LabelStore, ids: list[str]) -> dict[str, tuple[list[object], dict[str, str]]]:
    """(turns, metadata) of the newest judged row of each id the label store holds."""
    t = labels.table.c
    out: dict[str, tuple[list[object], dict[str, str]]] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        query = (sa.select(t.conversation_id, t.turns, t.metadata).where(t.conversation_id.in_(chunk))
                 .order_by(t.labelled_at.asc(), t.id.asc()))
        rows = labels.transact(partial(_all, query), "read labels")
        for cid, turns, metadata in rows:
            out[str(cid)] = (list(turns), dict(metadata or {}))  # ascending: the newest row wins
    return out


def _all(query: sa.Select[Any], conn: sa.Connection) -> list[Any]:
    return list(conn.execute(query).all())


def human_anchors(labels: LabelStore, rubric: RubricSet, *, redactor: Redactor, ref: Callable[[str], str],
                  max_anchors: int = DEFAULT_MAX) -> HumanAnchors:
    """Anchors from every conversation with human labels, the most recently labelled ``max_anchors`` of them."""
    by_conversation: dict[str, list[HumanLabel]] = {}
    for label in HumanLabelStore(labels).fetch():  # oldest first: a later answer replaced an earlier one
        by_conversation.setdefault(label.conversation_id, []).append(label)
    known = set(rubric.item_ids)
    out = HumanAnchors(anchors=[])
    answers: dict[str, dict[str, bool]] = {}
    for cid, found in by_conversation.items():
        human = {h.item_id: h.human_verdict for h in found if h.item_id in known}
        if human:
            answers[cid] = human
        elif all(h.item_id == OVERALL for h in found):
            out.skipped["only_overall"] += 1
        else:
            out.skipped["not_in_rubric"] += 1
    newest = sorted(answers, key=lambda c: max(h.labelled_at for h in by_conversation[c]), reverse=True)
    stored = stored_conversations(labels, newest)
    for cid in newest:
        if cid not in stored:
            out.skipped["reference_id" if is_reference(cid) else "no_text"] += 1
            continue
        if len(out.anchors) >= max_anchors:
            out.skipped["over_max"] += 1
            continue
        turns, metadata = stored[cid]
        key = ref(cid)
        try:
            conversation = Conversation.model_validate({"conversation_id": key, "turns": turns,
                                                        "metadata": metadata})
        except ValidationError:
            out.skipped["unreadable"] += 1
            continue
        out.anchors.append(Anchor(key, redactor.redact_conversation(conversation), answers[cid]))
        for item, verdict in answers[cid].items():
            counts = out.items.setdefault(item, {"yes": 0, "no": 0})
            counts["yes" if verdict else "no"] += 1
    if len(out.anchors) < MIN_ANCHORS:
        raise ConfigError(
            f"only {len(out.anchors)} conversations have human item labels and stored text ({out.skipped_text()}); "
            f"an anchor set needs at least {MIN_ANCHORS}: with 40, a judge change that flips 30 % of an item's "
            "verdicts is missed in 18 of 40 simulated seeds (docs/judge-drift.md); review more conversations")
    out.anchors.sort(key=lambda a: a.ref)
    return out


def content_version(anchors: list[Anchor]) -> str:
    """``human-`` and 12 hex digits of a hash of the anchors' references and labels: the same labels give the same
    version, so building again with nothing new changes nothing."""
    digest = hashlib.sha256()
    for anchor in sorted(anchors, key=lambda a: a.ref):
        digest.update(anchor.ref.encode())
        digest.update(repr(sorted(anchor.human.items())).encode())
    return "human-" + digest.hexdigest()[:12]
