"""What the review page reads and writes: the score store's flagged rows, the judged conversations' labels (their
redacted text and every verdict with its reason), the review queue and the human labels.

Conversations are named by their keyed reference (``ref-<hex>``) unless ``ui_raw_ids`` is set; a name from a URL
is resolved against the score store and the judged conversations of the review window, never trusted as an id.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import sqlalchemy as sa

from distill.human_labels import OVERALL, HumanLabel, HumanLabelStore
from distill.label_record import LabelRecord
from distill.reference_key import conversation_ref
from distill.score_store import ScoreStore
from distill.store import DAY_S, LabelStore
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import Settings
from monitor.judge.redact import Redactor
from monitor.stages.human_agreement import Estimate, agreement_stats, corrected_rate
from monitor.stages.review_queue import flagged, in_queue, review_probability

MAX_ROWS = 1000
QUEUE_DAYS = 7  # flagged judged conversations a day are counted over this many days
CACHE_S = 30.0  # how long the judged conversations read for the queue and the estimates are reused


@dataclass(frozen=True)
class Filters:
    item: str | None = None
    scorer: str | None = None
    dimension: str | None = None  # a metadata key of the configured dimensions
    value: str | None = None
    since: float = 0.0
    until: float = float("inf")


@dataclass
class Judged:
    """One judged conversation of the review window, as the queue sees it."""

    conversation_id: str
    verdicts: dict[str, bool | None]
    weight: float  # 1 / pi of the judge slice
    labelled_at: float
    flagged: bool = False
    pi: float = 0.0  # inclusion probability in the review queue
    reviewed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class ReviewData:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.rubric: RubricSet = load_rubric_set(settings.rubric_set, settings.prompts_dir)
        self.redact = Redactor.from_settings(settings.judge).redact
        self.labels = LabelStore.from_settings(settings.distill, redact=self.redact)
        self.ref = conversation_ref(settings.pii_reference_key, self.labels)
        self.scores = ScoreStore(self.labels, self.rubric, reference=self.ref, redact=self.redact,
                                 retention_days=settings.score_retention_days)
        self.humans = HumanLabelStore(self.labels)
        self._judged: tuple[float, list[Judged]] | None = None

    def close(self) -> None:
        self.labels.close()

    # --- names --------------------------------------------------------------------------------------------
    def shown(self, conversation_id: str) -> str:
        return conversation_id if self.settings.ui_raw_ids else self.ref(conversation_id)

    def resolve(self, name: str, now: float | None = None) -> str | None:
        """The conversation id a shown name stands for, or None."""
        if self.settings.ui_raw_ids:
            return name if self.labels.fetch(conversation_id=name, limit=1) or self._has_scores(name) else None
        found = self.scores.resolve([name])
        if name in found:
            return found[name]
        return next((j.conversation_id for j in self.judged(now) if self.ref(j.conversation_id) == name), None)

    def _has_scores(self, conversation_id: str) -> bool:
        t = self.scores.table.c
        query = sa.select(sa.func.count()).where(t.conversation_id == conversation_id)
        return bool(self.labels.transact(lambda conn: conn.execute(query).scalar_one(), "read scores"))

    # --- flagged conversations ------------------------------------------------------------------------------
    def flagged_rows(self, filters: Filters, limit: int = MAX_ROWS) -> list[dict[str, Any]]:
        """Yes verdicts (of the item, or of every DSAT item) in the window, newest first, with redacted text."""
        self.scores.ensure_table()
        t = self.scores.table.c
        query = sa.select(self.scores.table).where(t.scored_at >= filters.since, t.scored_at < filters.until)
        query = query.where(t.item_id == filters.item) if filters.item else query.where(t.polarity == "dsat")
        if filters.scorer:
            query = query.where(t.scorer == filters.scorer)
        query = query.order_by(t.scored_at.desc()).limit(limit * 4 if filters.dimension else limit)
        rows = self.labels.transact(lambda conn: conn.execute(query).mappings().all(), "read scores")
        found = [dict(r) for r in rows]
        if filters.dimension:
            found = [r for r in found if (r["metadata"] or {}).get(filters.dimension) == filters.value][:limit]
        texts = self._last_user_turns({str(r["conversation_id"]) for r in found})
        for row in found:
            cid = str(row.pop("conversation_id"))
            row["conversation"] = self.shown(cid)
            row["text"] = texts.get(cid, "")
            row.pop("conversation_ref", None)
        return found

    def _last_user_turns(self, ids: set[str]) -> dict[str, str]:
        """The last user turn of each judged conversation among ``ids`` (one query), redacted, 240 characters."""
        if not ids:
            return {}
        t = self.labels.table.c
        query = sa.select(t.conversation_id, t.turns).where(t.conversation_id.in_(sorted(ids)))
        out = {}
        for cid, turns in self.labels.transact(lambda conn: conn.execute(query).all(), "read labels"):
            users = [turn.get("text", "") for turn in turns if turn.get("role") == "user"]
            if users:
                out[str(cid)] = self.redact(users[-1])[:240]
        return out

    # --- one conversation -----------------------------------------------------------------------------------
    def conversation(self, conversation_id: str) -> dict[str, Any]:
        found = self.labels.fetch(conversation_id=conversation_id, limit=1)
        label: LabelRecord | None = found[0] if found else None
        t = self.scores.table.c
        query = sa.select(self.scores.table).where(t.conversation_id == conversation_id)
        rows = [dict(r) for r in self.labels.transact(lambda conn: conn.execute(query).mappings().all(), "read scores")]
        distilled = {r["item_id"]: r for r in rows if r["scorer"] == "distilled"}
        humans = {h.item_id: h for h in self.humans.fetch(conversation_id=conversation_id)}
        items = []
        for item in self.rubric.items:
            judged = next((i for i in label.items if i.item_id == item.id), None) if label else None
            items.append({"id": item.id, "name": item.name, "polarity": item.polarity,
                          "verdict": None if judged is None else judged.verdict,
                          "score": None if judged is None else judged.score,
                          "reason": self.redact(judged.explanation) if judged and judged.explanation else "",
                          "probability": distilled[item.id]["value"] if item.id in distilled else None,
                          "human": humans[item.id].answer if item.id in humans else None})
        return {
            "shown": self.shown(conversation_id), "label": label, "items": items, "score_rows": rows,
            "turns": [{"role": t.role, "text": self.redact(t.text)} for t in (label.turns if label else [])],
            "overall": humans[OVERALL].answer if OVERALL in humans else None,
            "model_version": label.model_version if label else (rows[0]["model_version"] if rows else ""),
            "judge": label.judge if label else "",
            "revisions": self.scores.history(conversation_id),  # empty unless the user came back and it was re-scored
        }

    # --- the review queue ------------------------------------------------------------------------------------
    def judged(self, now: float | None = None) -> list[Judged]:
        """Judged conversations of the last ``review_window_days``, each with its queue inclusion probability.

        Read from the label store at most every ``CACHE_S`` (a scrape of /metrics and each page need them)."""
        at = time.time() if now is None else now
        cached = self._judged
        if now is not None or cached is None or at - cached[0] > CACHE_S:
            cached = (at, self._read_judged(at))
            if now is None:
                self._judged = cached
        reviewed = self.humans.conversation_ids()
        return [replace(j, reviewed=j.conversation_id in reviewed) for j in cached[1]]

    def _read_judged(self, now: float) -> list[Judged]:
        t = self.labels.table.c
        query = sa.select(t.conversation_id, t["items"], t.inclusion_probability, t.labelled_at).where(
            t.labelled_at >= now - self.settings.review_window_days * DAY_S,
            t.rubric_set == self.rubric.id, t.rubric_version == self.rubric.version)
        found = self.labels.transact(lambda conn: conn.execute(query).all(), "read labels")
        out: dict[str, Judged] = {}
        for cid, items, pi_judge, at in found:
            verdicts = {i["item_id"]: i.get("verdict") for i in items}
            weight = 1.0 / (pi_judge or self.settings.sample_rate or 1.0)
            out[cid] = Judged(cid, verdicts, weight, at, flagged=flagged(verdicts, self.rubric))
        recent = sum(1 for j in out.values() if j.flagged and j.labelled_at >= now - QUEUE_DAYS * DAY_S)
        days = min(QUEUE_DAYS, self.settings.review_window_days)
        for j in out.values():
            j.pi = review_probability(j.flagged, budget_per_day=self.settings.review_budget_per_day,
                                      flagged_per_day=recent / days,
                                      unflagged_rate=self.settings.review_unflagged_rate)
        return sorted(out.values(), key=lambda j: -j.labelled_at)

    def queue(self, now: float | None = None) -> list[Judged]:
        return [j for j in self.judged(now) if in_queue(j.conversation_id, j.pi, self.settings.sample_salt)]

    def record_review(self, conversation_id: str, answers: dict[str, str], overall: str | None,
                      now: float | None = None) -> int:
        """Store a reviewer's answers: per item ``agree``, ``disagree``, ``yes`` or ``no``; overall sat/dsat."""
        judged = next((j for j in self.judged(now) if j.conversation_id == conversation_id), None)
        if judged is None:
            raise LookupError("only judged conversations of the review window can be reviewed")
        labels = []
        for item in self.rubric.items:
            answer, verdict = answers.get(item.id), judged.verdicts.get(item.id)
            if answer in ("agree", "disagree"):
                if verdict is None:
                    continue
                answer = "yes" if verdict == (answer == "agree") else "no"
            if answer in ("yes", "no"):
                labels.append(HumanLabel(conversation_id=conversation_id, item_id=item.id, answer=answer,
                                         judge_verdict=verdict, inclusion_probability=judged.pi,
                                         judge_weight=judged.weight, flagged=judged.flagged))
        if overall in ("sat", "dsat"):
            labels.append(HumanLabel(conversation_id=conversation_id, item_id=OVERALL, answer=overall,
                                     inclusion_probability=judged.pi, judge_weight=judged.weight,
                                     flagged=judged.flagged))
        return self.humans.upsert(labels)

    # --- agreement --------------------------------------------------------------------------------------------
    def agreement(self, now: float | None = None) -> dict[str, dict[str, Any]]:
        """Per rubric item with reviews: the four statistics, the human-corrected rate and the label count."""
        judged = self.judged(now)
        since = (time.time() if now is None else now) - self.settings.review_window_days * DAY_S
        reviewed = [h for h in self.humans.fetch(since=since, source="review")
                    if h.item_id != OVERALL and h.judge_verdict is not None and h.inclusion_probability]
        out: dict[str, dict[str, Any]] = {}
        for item in self.rubric.items:
            mine = [h for h in reviewed if h.item_id == item.id]
            if not mine:
                continue
            j = np.array([float(bool(h.judge_verdict)) for h in mine])
            h_ = np.array([float(h.human_verdict) for h in mine])
            pi = np.array([h.inclusion_probability or 1.0 for h in mine])
            w = np.array([h.judge_weight for h in mine])
            stats: dict[str, Any] = dict(agreement_stats(j, h_, pi, w))
            total = sum(x.weight for x in judged if x.verdicts.get(item.id) is not None)
            yes = sum(x.weight for x in judged if x.verdicts.get(item.id) is True)
            stats["corrected_rate"] = corrected_rate(yes, total, j, h_, pi, w) if total else Estimate(None)
            stats["judge_rate"] = Estimate(yes / total if total else None)
            stats["labels"] = len(mine)
            out[item.id] = stats
        return out

    def purge(self, now: float | None = None) -> int:
        return self.humans.purge(older_than_days=self.settings.review_window_days, now=now)
