"""The hot path of one input partition, without faust: a batch of raw events in, what to send out.

``ingest`` decodes each event, re-keys unkeyed ones (and, with ``forward_input``, every event read
from the input topic: monitor/runtime/layout.py) for convmon's re-keyed topic, sessionizes the rest
and reports the conversations that closed; ``judge_slice`` picks the ones for the judge topic
(stages/judge_slice.py); ``count``
exports the distilled records once each (dedup window), adds them to their partition's running totals
in the same batch (``stages/totals.py``) and encodes them compactly for the scores topic. A judge record
names its input partition (``SOURCE_PARTITION``) and goes to the judge partition of that number (modulo
the judge topic's count): its verdict is counted in that input partition's totals, by its owner, whatever
the partition counts of the input and judge topics. The writer around it only moves bytes (engine/writer.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import Conversation, Event, RejectedTurn, TurnEvent, encode
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.score_codec import encode_score, score_headers, score_id
from monitor.contracts.scores import ScoreRecord
from monitor.stages.bounds import REASONS, bound_conversation
from monitor.stages.clock import INPUT, REKEYED, PartitionClock
from monitor.stages.deadletter import DeadLetter, dead_letter
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.incomplete import IncompleteConversations, Policy, marker, rejection_of
from monitor.stages.inputs import InputDecoder, JsonInput, UnknownFields
from monitor.stages.judge_slice import judge_slice
from monitor.stages.revisions import Revisions, counted
from monitor.stages.sampler import InclusionPolicy
from monitor.stages.sends import Send
from monitor.stages.sessionize import Closed, Outcome, Sessionizer
from monitor.stages.totals import PartitionTotals


class Input(NamedTuple):  # a tuple: one per record, built in the hot loop (a frozen dataclass costs 5x)
    key: bytes | None
    value: bytes | None
    partition: int
    rekeyed: bool = False  # read from convmon's re-keyed topic
    timestamp: float | None = None  # the record's Kafka timestamp (seconds): it drives the partition's clock
    caught_up: bool = True  # no later record in the partition's log (by the consumer's high watermark)


@dataclass
class Outputs:
    rekey: list[Send] = field(default_factory=list)  # for the re-keyed topic (``rekeyed_record``)
    dead: list[DeadLetter] = field(default_factory=list)
    closed: list[tuple[Conversation, int]] = field(default_factory=list)  # (conversation, partition)
    revisions: dict[int, int] = field(default_factory=dict)  # id(conversation) -> revision, those above 1


def rekeyed_record(event: Event, raw: bytes | None, timestamp: float | None) -> Send:
    """The one place a re-keyed record is built: the event's bytes as read (or as decoded from OTLP), under its
    conversation id, with the input record's timestamp (the partition clocks run on it: stages/clock.py)."""
    return Send(event.conversation_id.encode(), raw if raw is not None else encode(event), [], timestamp)


class HotPath:
    def __init__(self, sessions: Sessionizer, dedup: DedupWindow, totals: PartitionTotals, exporter: Exporter,
                 metrics: Metrics, rubric: RubricSet, *, max_event_bytes: int, max_request_bytes: int,
                 sample_rate: float, policy: InclusionPolicy | None = None,
                 decoder: InputDecoder | None = None, clock: PartitionClock | None = None,
                 forward_input: bool = False, judge_configured: bool = True,
                 incomplete: Policy = "dead_letter", revisions: Revisions | None = None) -> None:
        self.sessions = sessions
        self.revisions = revisions  # the latest revision of a re-scored conversation counts (stages/revisions.py)
        self.clock = clock or PartitionClock()  # idle expiry and lateness in each partition's time (stages/clock.py)
        self.dedup = dedup
        self.totals = totals
        self.exporter = exporter
        self.metrics = metrics
        self.rubric = rubric
        self.max_event_bytes = max_event_bytes
        self.max_request_bytes = max_request_bytes
        self.sample_rate = sample_rate
        self.policy = policy if policy is not None else InclusionPolicy(base_rate=sample_rate)
        for by in ("hash", "uncertainty", "feedback"):
            metrics.judge_sampled.labels(by)
        for kind in ("turn", "end", "conversation"):  # series from zero, so increase() sees the first redelivery
            metrics.redelivered.labels(kind)
        for reason in REASONS:
            metrics.truncated.labels(reason)
            if reason != "max_metadata_bytes":
                metrics.turns_truncated.labels(reason)
        metrics.evicted.labels("max_open_conversations")
        metrics.open_conversations.set_function(lambda: float(len(sessions.open)))  # read on scrape
        metrics.reopenable.set_function(lambda: float(sum(map(len, sessions.reopenable.values()))))
        metrics.closed_conversations.set_function(lambda: float(len(sessions.closed)))
        for scorer in ("llm", "distilled"):
            metrics.superseded.labels(scorer)
        self.decoder = decoder or JsonInput(max_event_bytes)
        self.unknown_fields = UnknownFields(metrics)
        # Without a judge endpoint only `convmon simulate`'s conversations can be judged (their simulated truth):
        # the rest of the slice is counted as route="unjudged", not sent to die as judge dead letters.
        self.judge_configured = judge_configured
        metrics.judge_configured.set(1 if judge_configured else 0)
        # OTLP calls repeat the chat history (a redacting wrapper says what its decoder is: stages/boundary.py)
        self.repeating_input = bool(getattr(self.decoder, "repeating", not isinstance(self.decoder, JsonInput)))
        self.forward_input = forward_input  # the input's partitions are not the state's: re-key every event
        # conversations with a rejected turn: dead-lettered whole, or scored marked incomplete (stages/incomplete.py)
        self.incomplete = IncompleteConversations(metrics, policy=incomplete, max_request_bytes=max_request_bytes)

    def assign(self, owned: set[int], now: float) -> None:
        """Rebuild the in-memory indexes from the restored tables (after a restart or rebalance)."""
        self.sessions.rebuild(owned, now)
        self.totals.rebuild(owned)
        self.dedup.rebuild(owned)
        if self.revisions is not None:
            self.revisions.rebuild(owned)

    def restored(self, seconds: float) -> None:
        """How long the last assignment took to restore this worker's state (runtime/ownership.py measures it)."""
        self.metrics.state_restore.set(seconds)

    def revoke(self, partitions: set[int]) -> None:
        self.totals.revoke(partitions)
        self.clock.forget(partitions)

    def dead(self, raw: bytes | None, key: bytes | None, reason: str, detail: str, stage: str, *,
             problem: InvalidEvent | None = None) -> DeadLetter:
        return dead_letter(raw, key, reason=reason, detail=detail, stage=stage, max_bytes=self.max_request_bytes,
                           field=problem.field if problem else None,
                           conversation_id=problem.conversation_id if problem else None)

    def ingest(self, batch: Sequence[Input], now: float) -> Outputs:
        out = Outputs()
        kinds: Counter[str] = Counter()
        for item in batch:
            stateful = item.rekeyed or not self.forward_input  # read from a partition the sessions are kept by
            if stateful:
                self.clock.observe(item.partition, item.timestamp, now, caught_up=item.caught_up,
                                   source=REKEYED if item.rekeyed else INPUT)
            at = self.clock.now(item.partition, now)  # the sessions' time: this partition's clock, not processing time
            try:
                decoded = self.decoder.decode(item.value, rekeyed=item.rekeyed,
                                              timestamp=item.timestamp if item.timestamp is not None else now)
            except InvalidEvent as exc:
                out.dead.append(self.dead(item.value, item.key, exc.reason, exc.detail, "sessionize", problem=exc))
                self._rejected(exc, item, stateful, at, out)
                continue
            if decoded.problem is not None:
                out.dead.append(self.dead(item.value, item.key, decoded.problem.reason, decoded.problem.detail,
                                          "sessionize", problem=decoded.problem))
            self.unknown_fields.count(decoded.unknown_fields)
            for role in decoded.skipped:  # chat messages that are not turns (bounded roles: openai_chat.ROLES)
                self.metrics.input_messages_skipped.labels(role).inc()
            for event, raw in decoded.events:
                cid = event.conversation_id
                if isinstance(event, RejectedTurn):
                    self._marker(event, raw, item, at, out)
                    continue
                if not stateful or item.key != cid.encode():  # one partition must own each conversation
                    out.rekey.append(rekeyed_record(event, raw, item.timestamp))
                    kinds[event.type] += 1  # counted once, where it is first read (not again from the re-key hop)
                    continue
                if isinstance(event, TurnEvent) and self.repeating_input and self.sessions.repeats(event):
                    self.metrics.repeated_turns.inc()  # an OTLP call repeating the history
                    continue
                if not item.rekeyed:
                    kinds[event.type] += 1
                if isinstance(event, Conversation):  # whole: the session caps apply here too
                    bounded, cut = bound_conversation(event, self.sessions.limits)
                    outcome: Outcome = self.sessions.whole(bounded, len(event.turns), item.partition, at)
                    if outcome == "ok":
                        self._count_cuts(cut)
                        out.closed.append((bounded, item.partition))
                        continue
                elif isinstance(event, TurnEvent):
                    outcome, closed = self.sessions.turn(event, item.partition, at)
                    out.closed.extend((c, item.partition) for c in closed)
                else:
                    outcome, closed = self.sessions.end(event, item.partition, at, rekeyed=item.rekeyed,
                                                        raw=raw)
                    out.closed.extend((c, item.partition) for c in closed)
                if outcome == "redelivered":  # its conversation closed with it: a batch delivered again
                    self.metrics.redelivered.labels(event.type).inc()
                elif outcome in ("late", "unknown_conversation"):
                    out.dead.append(self._late(event, raw, item.key, outcome, at))
        for kind, n in kinds.items():
            self.metrics.events.labels(kind).inc(n)
        self._take_tally(out)
        out.revisions = self.sessions.take_revisions()
        out.closed = self.incomplete.settle(out.closed, out.dead)
        self._count_finished(out.closed)
        return out

    def _late(self, event: Event, raw: bytes | None, key: bytes | None, outcome: str, at: float) -> DeadLetter:
        """The dead letter of an event its conversation can no longer take, saying why."""
        kind = event.type
        self.metrics.late_events.labels(kind).inc()
        why = ""
        if outcome == "late":
            why = f" ({self.sessions.late_reason(event.conversation_id, at, whole=kind == 'conversation')})"
        return self.dead(raw if raw is not None else encode(event), key, "late_event" if outcome == "late" else outcome,
                         f"{kind} event: {outcome}{why}", "sessionize")

    def _rejected(self, exc: InvalidEvent, item: Input, stateful: bool, at: float, out: Outputs) -> None:
        """A rejected turn leaves its conversation incomplete: marked here if this worker writes it, else through
        a marker on the re-keyed topic to the conversation's partition."""
        rejection = rejection_of(exc)
        if rejection is None or exc.conversation_id is None:
            return
        if stateful and item.key == exc.conversation_id.encode():
            _, closed = self.sessions.reject(exc.conversation_id, rejection, item.partition, at)
            out.closed.extend((c, item.partition) for c in closed)
        else:
            out.rekey.append(rekeyed_record(marker(exc, rejection, item.timestamp or at), None, item.timestamp))

    def _marker(self, event: RejectedTurn, raw: bytes | None, item: Input, at: float, out: Outputs) -> None:
        """A marker is convmon's own record: read from its re-keyed topic, never from the input."""
        if item.rekeyed and item.key == event.conversation_id.encode():
            _, closed = self.sessions.reject(event.conversation_id, event.rejection, item.partition, at)
            out.closed.extend((c, item.partition) for c in closed)
        else:
            out.dead.append(self.dead(raw if raw is not None else encode(event), item.key, "invalid_schema",
                                      "field 'type': 'rejected' is convmon's own record, not an input event",
                                      "sessionize"))

    def _count_cuts(self, cut: Counter[str]) -> None:
        """A whole conversation's cuts: the conversation once per cap, and its turns."""
        for reason, n in cut.items():
            self.metrics.truncated.labels(reason).inc()
            if reason != "max_metadata_bytes":
                self.metrics.turns_truncated.labels(reason).inc(n)

    def _take_tally(self, out: Outputs) -> None:
        """The sessionizer's cuts and evictions of this batch: counted; evicted conversations go out."""
        tally = self.sessions.take_tally()
        if tally.reopened:
            self.metrics.reopened.inc(tally.reopened)
        if tally.forgotten:
            self.metrics.closed_forgotten.inc(tally.forgotten)
        for reason, n in tally.truncated.items():
            self.metrics.truncated.labels(reason).inc(n)
        for reason, n in tally.turns.items():
            self.metrics.turns_truncated.labels(reason).inc(n)
        evicted = tally.evicted
        if evicted.conversations or evicted.unknown:
            self.metrics.evicted.labels("max_open_conversations").inc(len(evicted.conversations) +
                                                                      len(evicted.unknown))
            out.closed.extend((c, self.sessions_partition(c)) for c in evicted.conversations)
            for cid, raw in evicted.unknown:
                self.metrics.late_events.labels("end").inc()
                out.dead.append(self.dead(raw, cid.encode(), "unknown_conversation",
                                          "end event: evicted by max_open_conversations before any turn came",
                                          "sessionize"))

    def sweep(self, now: float, owned: set[int]) -> Outputs:
        closed: Closed = self.sessions.sweep(now, owned, clock=lambda p: self.clock.now(p, now))
        out = Outputs(closed=[(c, self.sessions_partition(c)) for c in closed.conversations],
                      revisions=self.sessions.take_revisions())
        for cid, raw in closed.unknown:
            self.metrics.late_events.labels("end").inc()
            out.dead.append(self.dead(raw, cid.encode(), "unknown_conversation",
                                      "end event: no turns arrived within allowed_lateness_s", "sessionize"))
        self._take_tally(out)  # what closing them cost (tombstones forgotten past the cap)
        out.closed = self.incomplete.settle(out.closed, out.dead)
        self._count_finished(out.closed)
        return out

    def sessions_partition(self, conversation: Conversation) -> int:
        return self.sessions.partition_of(conversation.conversation_id)

    def _count_finished(self, closed: list[tuple[Conversation, int]]) -> None:
        reasons = Counter(c.end_reason for c, _ in closed)
        for reason, n in reasons.items():
            self.metrics.conversations.labels(reason).inc(n)

    def judge_slice(self, closed: Sequence[tuple[Conversation, int]], *, judge_accepting: bool, boost: bool = True,
                    records: Sequence[ScoreRecord] = (), revisions: Mapping[int, int] | None = None) -> list[Send]:
        """The judge-topic records of the conversations drawn for the judge (stages/judge_slice.py)."""
        return judge_slice(self.policy, self.metrics, closed, judge_configured=self.judge_configured,
                           judge_accepting=judge_accepting, boost=boost, records=records, revisions=revisions)

    @staticmethod
    def mark_shadows(records: Sequence[ScoreRecord], judged: Sequence[Send]) -> list[ScoreRecord]:
        """Distilled records of the conversations sent to the judge become shadows (for agreement)."""
        keys = {s.key.decode() for s in judged}
        return [r.model_copy(update={"shadow": True}) if r.conversation_id in keys else r for r in records]

    def count(self, records: list[ScoreRecord], partitions: dict[str, int], now: float) -> list[Send]:
        """Export each record once (the dedup window) and commit it to its partition's totals, one batch
        per partition; every record goes to the scores topic (at least once, with its stable id as a header)."""
        sends = []
        fresh: dict[int, list[ScoreRecord]] = {}
        duplicates: Counter[str] = Counter()
        for record in records:
            cid, partition = record.conversation_id, partitions[record.conversation_id]
            if not self.totals.owns(partition):  # not (or no longer) this worker's: its owner counts it
                self.metrics.unscored.labels("partition_revoked").inc()
            elif not self.dedup.first(score_id(record), partition, now):
                duplicates[record.scorer] += 1
            elif self.revisions is not None and self.revisions.stale(record):
                self.metrics.superseded.labels(record.scorer).inc()
            else:
                fresh.setdefault(partition, []).append(record)
            sends.append(Send(cid.encode(), encode_score(record, self.rubric), score_headers(record)))
        for scorer, n in duplicates.items():
            self.metrics.duplicates.labels(scorer).inc(n)
        for partition, batch in fresh.items():
            self.totals.add(partition, counted(self.exporter, self.revisions, batch, partition, now))
            self.totals.commit(partition)
        return sends
