"""Per-id accounting of a fault run: what happened to every conversation produced, read back from the
``scores`` and ``dead-letters`` topics, against what was expected of it.

Only the public contracts are used: score records carry ``conversation_id`` and ``scorer``; a dead
letter carries the conversation id as its key (or, unkeyed, in its bounded prefix of the original
bytes) and its reason in the ``convmon-reason`` header.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import ConsumerRecord

ANY_REASON = "*"
SCORE_ID_HEADER = "convmon-score-id"
# what may differ between two copies of one score: when and how fast it was made, and what the copy's own judge
# request used (a re-sent conversation is judged again; a provider's prompt cache, the stand-in judge's too, makes
# the second request's usage, hence its cost, differ)
PER_COPY = ("scored_at", "latency_s", "tokens", "cost_usd")
_CID = re.compile(rb'"conversation_id"\s*:\s*"([^"]{1,256})"')
_GARBAGE = re.compile(rb"garbage-\d+")


@dataclass(frozen=True)
class Expect:
    """What must become of one conversation: scored once, or dead-lettered once with ``reason``.

    ``either`` is for inputs whose policy the contract leaves open (scored truncated, or dead-lettered
    with any reason): exactly one of the two, once.
    """

    reason: str | None = None
    either: bool = False

    @property
    def label(self) -> str:
        return "scored or dead-lettered" if self.either else f"dead-lettered {self.reason}" if self.reason else "scored"


SCORED = Expect()


@dataclass
class Ledger:
    """Outcomes per id, fed with the records of the scores and dead-letters topics as they arrive."""

    expect: dict[str, Expect]
    scorer: str = "distilled"
    garbage: set[str] = field(default_factory=set)  # markers of garbage records (not conversations)
    scores: Counter[str] = field(default_factory=Counter)
    dead: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    garbage_dead: Counter[str] = field(default_factory=Counter)
    unattributed_dead: Counter[str] = field(default_factory=Counter)  # reason -> dead letters naming no known id
    unparsable_scores: int = 0
    foreign_scores: int = 0  # score records of ids never produced
    # the stable id on each score record (header convmon-score-id, ``<scorer>:<conversation_id>``): what a
    # consumer of the at-least-once `scores` topic dedupes on; every copy must carry the right one and agree
    score_id_wrong: int = 0  # records without the header, or with one that is not their scorer:conversation_id
    copies: dict[str, set[bytes]] = field(default_factory=lambda: defaultdict(set))  # cid -> distinct scores

    def add_scores(self, records: Iterable[ConsumerRecord]) -> None:
        for r in records:
            try:
                value = orjson.loads(r.value)
                cid, scorer = value["conversation_id"], value["scorer"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                self.unparsable_scores += 1
                continue
            if dict(r.headers or ()).get(SCORE_ID_HEADER) != f"{scorer}:{cid}".encode():
                self.score_id_wrong += 1
            if scorer != self.scorer:
                continue
            if cid in self.expect:
                self.scores[cid] += 1
                self.copies[cid].add(orjson.dumps({k: v for k, v in value.items() if k not in PER_COPY}))
            else:
                self.foreign_scores += 1

    def add_dead_letters(self, records: Iterable[ConsumerRecord]) -> None:
        for r in records:
            reason = dict(r.headers).get("convmon-reason", b"").decode(errors="replace") or "<no reason header>"
            cid = self._conversation_of(r)
            if cid is not None:
                self.dead[cid].append(reason)
                continue
            marks = set(_GARBAGE.findall((r.key or b"") + b" " + (r.value or b"")[:4096]))
            hits = [m.decode() for m in marks if m.decode() in self.garbage]
            for mark in hits:
                self.garbage_dead[mark] += 1
            if not hits:
                self.unattributed_dead[reason] += 1

    def _conversation_of(self, r: ConsumerRecord) -> str | None:
        key = r.key.decode(errors="replace") if r.key else None
        if key in self.expect:
            return key
        found = _CID.search((r.value or b"")[:65536])
        cid = found.group(1).decode(errors="replace") if found else None
        return cid if cid in self.expect else None

    def outcome(self, cid: str) -> str:
        """``ok``, ``lost``, ``double`` (more than one score or dead letter) or ``wrong`` (scored and
        dead-lettered, dead-lettered when it should be scored, or with another reason)."""
        expect, n, reasons = self.expect[cid], self.scores.get(cid, 0), self.dead.get(cid, [])
        if n == 0 and not reasons:
            return "lost"
        if n and reasons:
            return "wrong"
        if n > 1 or len(reasons) > 1:
            return "double"
        if expect.either:
            return "ok"
        if expect.reason is None:
            return "ok" if n == 1 else "wrong"
        return "ok" if reasons and (expect.reason in (ANY_REASON, reasons[0])) else "wrong"

    def accounted(self) -> int:
        """Ids whose expected outcome was seen (a score, or a dead letter when one is expected), plus garbage
        records dead-lettered: progress for the waits. A dead letter of an id that should be scored does
        not count: its score may still come (a conversation finished by idle expiry)."""
        seen = 0
        for cid, expect in self.expect.items():
            scored, dead = bool(self.scores.get(cid)), bool(self.dead.get(cid))
            seen += scored or dead if expect.either else dead if expect.reason else scored
        return seen + len(self.garbage_dead)

    def complete(self) -> bool:
        return self.accounted() >= len(self.expect) + len(self.garbage)

    def table(self) -> dict[str, Any]:
        outcomes = {cid: self.outcome(cid) for cid in self.expect}
        counts = Counter(outcomes.values())
        by_expect: dict[str, Counter[str]] = defaultdict(Counter)
        for cid, result in outcomes.items():
            by_expect[self.expect[cid].label][result] += 1
        examples: dict[str, list[Any]] = {
            kind: [(cid, self.scores.get(cid, 0), self.dead.get(cid, [])) for cid, o in outcomes.items()
                   if o == kind][:8] for kind in ("lost", "double", "wrong")}
        examples["disagree"] = [(cid, _differing(copies)) for cid, copies in self.copies.items() if len(copies) > 1][:8]
        return {
            "produced": len(self.expect),
            # the truth for the scored counters: ids that must be scored, and policy ids that were scored once
            "expected_scored": sum(1 for cid, e in self.expect.items()
                                   if e == SCORED or (e.either and outcomes[cid] == "ok" and self.scores.get(cid))),
            "scored_once": sum(1 for cid, o in outcomes.items() if o == "ok" and self.scores.get(cid) == 1),
            "dead_lettered": sum(1 for cid, o in outcomes.items() if o == "ok" and self.dead.get(cid)),
            "lost": counts["lost"],
            "double_counted": counts["double"],
            "wrong_outcome": counts["wrong"],
            "by_expectation": {k: dict(v) for k, v in sorted(by_expect.items())},
            "dead_letter_reasons": dict(Counter(r for rs in self.dead.values() for r in rs)),
            "garbage_produced": len(self.garbage),
            "garbage_dead_lettered": len(self.garbage_dead),
            "unattributed_dead_letters": dict(self.unattributed_dead),
            # deduplicated by the score id, each id scored once: no score lost, and every copy the same score
            "score_id_wrong": self.score_id_wrong,
            "scored_once_by_score_id": sum(1 for cid, e in self.expect.items()
                                           if self.scores.get(cid) and len(self.copies[cid]) == 1),
            "copies_disagree": sum(1 for c in self.copies.values() if len(c) > 1),
            "unparsable_scores": self.unparsable_scores,
            "foreign_scores": self.foreign_scores,
            "examples": examples,
        }


def _differing(copies: Iterable[bytes]) -> dict[str, list[Any]]:
    """The top-level fields in which copies of one score differ, with each copy's value."""
    values = [orjson.loads(c) for c in copies]
    keys = sorted({k for v in values for k in v})
    return {k: [v.get(k) for v in values] for k in keys if len({orjson.dumps(v.get(k)) for v in values}) > 1}
