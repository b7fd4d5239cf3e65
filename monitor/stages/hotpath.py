"""The hot path of one input partition, without faust: a batch of raw events in, what to send out.

``ingest`` decodes each event, re-keys unkeyed ones, sessionizes the rest and reports the
conversations that closed; ``judge_slice`` picks the sampled ones for the judge topic (with the
router's weight); ``count`` exports the distilled records once each (dedup window), adds them to
their partition's running totals in the same batch (``stages/totals.py``) and encodes them
compactly for the scores topic. The agent around it only moves bytes (runtime/agents.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import Conversation, TurnEvent, decode_event
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.score_codec import encode_score
from monitor.contracts.scores import ScoreRecord
from monitor.stages.deadletter import DeadLetter, dead_letter
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.route import route
from monitor.stages.sessionize import Closed, Sessionizer
from monitor.stages.totals import PartitionTotals

REKEYED = "convmon-rekeyed"  # header on an event re-produced under its conversation id
WEIGHT = "convmon-sample-weight"  # header on a judge-topic record: the router's importance weight


@dataclass(frozen=True)
class Input:
    key: bytes | None
    value: bytes | None
    partition: int
    rekeyed: bool = False


@dataclass
class Outputs:
    rekey: list[tuple[bytes, bytes]] = field(default_factory=list)  # (conversation id, raw event)
    dead: list[DeadLetter] = field(default_factory=list)
    closed: list[tuple[Conversation, int]] = field(default_factory=list)  # (conversation, partition)


@dataclass(frozen=True)
class Send:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


class HotPath:
    def __init__(self, sessions: Sessionizer, dedup: DedupWindow, totals: PartitionTotals, exporter: Exporter,
                 metrics: Metrics, rubric: RubricSet, *, max_event_bytes: int, max_request_bytes: int,
                 sample_rate: float) -> None:
        self.sessions = sessions
        self.dedup = dedup
        self.totals = totals
        self.exporter = exporter
        self.metrics = metrics
        self.rubric = rubric
        self.max_event_bytes = max_event_bytes
        self.max_request_bytes = max_request_bytes
        self.sample_rate = sample_rate

    def assign(self, owned: set[int], now: float) -> None:
        """Rebuild the in-memory indexes from the restored tables (after a restart or rebalance)."""
        self.sessions.rebuild(owned, now)
        self.dedup.rebuild(owned, self.totals.rebuild(owned))

    def revoke(self, partitions: set[int]) -> None:
        self.totals.revoke(partitions)

    def dead(self, raw: bytes | None, key: bytes | None, reason: str, detail: str, stage: str) -> DeadLetter:
        return dead_letter(raw, key, reason=reason, detail=detail, stage=stage, max_bytes=self.max_request_bytes)

    def ingest(self, batch: Sequence[Input], now: float) -> Outputs:
        out = Outputs()
        kinds: Counter[str] = Counter()
        for item in batch:
            try:
                event = decode_event(item.value or b"", max_bytes=self.max_event_bytes)
            except InvalidEvent as exc:
                out.dead.append(self.dead(item.value, item.key, exc.reason, exc.detail, "sessionize"))
                continue
            kinds[event.type] += 1
            cid = event.conversation_id
            if item.key != cid.encode():  # one partition must own each conversation
                out.rekey.append((cid.encode(), item.value or b""))
                continue
            if isinstance(event, Conversation):
                out.closed.append((event, item.partition))
                continue
            if isinstance(event, TurnEvent):
                outcome, closed = self.sessions.turn(event, item.partition, now)
            else:
                outcome, closed = self.sessions.end(event, item.partition, now, rekeyed=item.rekeyed, raw=item.value)
            out.closed.extend((c, item.partition) for c in closed)
            if outcome == "truncated":
                self.metrics.truncated.inc()
            elif outcome in ("late", "unknown_conversation"):
                kind = "turn" if isinstance(event, TurnEvent) else "end"
                self.metrics.late_events.labels(kind).inc()
                reason = "late_event" if outcome == "late" else outcome
                out.dead.append(self.dead(item.value, item.key, reason, f"{kind} event: {outcome}", "sessionize"))
        for kind, n in kinds.items():
            self.metrics.events.labels(kind).inc(n)
        self._count_finished(out.closed)
        return out

    def sweep(self, now: float, owned: set[int]) -> Outputs:
        closed: Closed = self.sessions.sweep(now, owned)
        out = Outputs(closed=[(c, self.sessions_partition(c)) for c in closed.conversations])
        for cid, raw in closed.unknown:
            self.metrics.late_events.labels("end").inc()
            out.dead.append(self.dead(raw, cid.encode(), "unknown_conversation",
                                      "end event: no turns arrived within allowed_lateness_s", "sessionize"))
        self._count_finished(out.closed)
        return out

    def sessions_partition(self, conversation: Conversation) -> int:
        return self.sessions.closed[conversation.conversation_id][1]

    def _count_finished(self, closed: list[tuple[Conversation, int]]) -> None:
        reasons = Counter(c.end_reason for c, _ in closed)
        for reason, n in reasons.items():
            self.metrics.conversations.labels(reason).inc(n)

    def judge_slice(self, closed: list[tuple[Conversation, int]], *, judge_accepting: bool) -> list[Send]:
        """The sampled conversations, as judge-topic records carrying the router's weight."""
        sends = []
        decisions: Counter[str] = Counter()
        for conversation, _ in closed:
            decision = route(conversation.conversation_id, rate=self.sample_rate, judge_accepting=judge_accepting)
            decisions[decision.reason] += 1
            if decision.judge:
                raw = orjson.dumps(conversation.model_dump(mode="json", exclude_none=True))
                sends.append(Send(conversation.conversation_id.encode(), raw,
                                  [(WEIGHT, repr(decision.sample_weight).encode())]))
        for reason, n in decisions.items():
            self.metrics.routed.labels(reason).inc(n)
        return sends

    def count(self, records: list[ScoreRecord], partitions: dict[str, int], now: float) -> list[Send]:
        """Export each record once (the dedup window) and commit it to its partition's totals, one batch
        per partition; every record goes to the scores topic (at least once)."""
        sends = []
        fresh: dict[int, list[ScoreRecord]] = {}
        duplicates: Counter[str] = Counter()
        for record in records:
            cid, partition = record.conversation_id, partitions[record.conversation_id]
            if not self.totals.owns(partition):  # not (or no longer) this worker's: its owner counts it
                self.metrics.unscored.labels("partition_revoked").inc()
            elif self.dedup.first(f"{record.scorer}:{cid}", partition, now):
                fresh.setdefault(partition, []).append(record)
            else:
                duplicates[record.scorer] += 1
            sends.append(Send(cid.encode(), encode_score(record, self.rubric), []))
        for scorer, n in duplicates.items():
            self.metrics.duplicates.labels(scorer).inc(n)
        for partition, batch in fresh.items():
            self.totals.add(partition, self.exporter.observe_batch(batch))
            self.totals.commit(partition)
        return sends


def is_rekeyed(headers: Sequence[tuple[str, bytes]] | dict[str, bytes] | None) -> bool:
    items = headers.items() if isinstance(headers, dict) else (headers or ())
    return any(k == REKEYED for k, _ in items)

