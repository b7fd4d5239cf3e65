"""Turn events → finished conversations, over an append-only store (a faust table in the worker).

State grows with the conversation, not its square: each turn is written once under its own key
(``t|<cid>|<index>``), a small header (``s|<cid>``) is written when the conversation opens, and on
close the header becomes a tombstone and the turn keys are deleted. What the hot path needs per
open conversation (indices, sizes, merged metadata, last activity) lives in memory in
:class:`Open` and is rebuilt from the store after a restart or a rebalance (:meth:`Sessionizer.rebuild`).

Order does not come from Kafka: turns are ordered by ``turn_index``. A conversation closes when
its ``end`` event said how many turns it has (``turn_count``) and all are present; an ``end``
without a count closes it at once when it came keyed (a keyed producer's order holds within a
partition) and after ``allowed_lateness_s`` when it was re-keyed (unkeyed producers: its turns
may still be on their way). Without an end, ``idle_timeout_s`` closes it.

Every time here (``last_seen``, idle expiry, ``allowed_lateness_s``, tombstone retention) is the
partition's clock (stages/clock.py), not processing time: its latest record's Kafka timestamp plus the
wall time since that record was consumed. A worker that lags reads a conversation's turns with the gaps
they were written with, so it does not close conversations whose next turns are still queued (and then
dead-letter those as ``late_event``), nor while it stalls behind its log; a quiet, caught-up partition's clock
runs with wall time, so its last conversations still close.
A tombstone lives ``reopen_window_s + closed_retention_s``; within ``reopen_window_s`` an event the conversation
did not have reopens it (stages/reopen.py). It records the turns the conversation closed with (every index
below ``n``) and whether its end closed it, so an event of a closed conversation that it already had is
``redelivered`` (a batch delivered again because its offsets were not committed, e.g. across a broker
restart): counted, not dead-lettered. Any other event for a closed conversation that cannot reopen is ``late``.

Bounded: at most ``max_turns`` turns, ``max_chars`` characters and ``max_bytes`` JSON bytes of
turns, ``max_metadata_bytes`` of merged metadata (plus simulated truth) per conversation. The
policy is *truncate and flag*: a turn longer than ``max_turn_chars`` is cut (with a mark); turns
past the caps and metadata keys that do not fit are dropped; the conversation is emitted with
``truncated=True``. So a session, and the conversation it becomes, always fit one produce request.
Each cut is tallied (:class:`Tally`) once per conversation and cap, and per turn, for the metrics.

A turn that failed validation is dead-lettered by the hot path, which tells the sessionizer (:meth:`reject`):
the conversation is marked incomplete with its first rejected turn (kept in the header), and is emitted with
that mark (``Conversation.incomplete``) when it closes; what to do with it is the hot path's policy.

At most ``max_open`` conversations are open per partition: a new one first finishes the partition's
least recently active conversation (as ``idle``; an end still waiting for its first turn becomes an
``unknown`` dead letter, as in a sweep). Memory then stays bounded whoever writes to the input topic.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from monitor.contracts.events import Conversation, EndEvent, Rejection, TurnEvent
from monitor.stages.bounds import TRUNCATION_MARK, json_bytes, over_cap, turn_size
from monitor.stages.bounds import Limits as Limits
from monitor.stages.reopen import Reopening, inherited
from monitor.stages.session_store import (
    Open,
    Tombstone,
    assemble,
    end_event,
    end_key,
    header_key,
    held_turns,
    open_header,
    read_index,
    turn_key,
)
from monitor.stages.session_store import Store as Store  # dedup keeps its marks in the same kind of store

Outcome = Literal["ok", "replaced", "truncated", "pending", "late", "redelivered", "unknown_conversation"]
RAW_END_MAX = 65_536  # an end that waits for its turns keeps its original bytes up to this size


@dataclass
class Closed:
    conversations: list[Conversation] = field(default_factory=list)
    unknown: list[tuple[str, bytes]] = field(default_factory=list)  # ends whose turns never came: (id, bytes)


@dataclass
class Tally:
    """What the stage did that the metrics count (it holds no registry); the hot path takes it per batch."""

    truncated: Counter[str] = field(default_factory=Counter)  # conversations newly cut, by cap
    turns: Counter[str] = field(default_factory=Counter)  # turns dropped or cut, by cap
    evicted: Closed = field(default_factory=Closed)  # finished early by max_open
    reopened: int = 0  # scored conversations a later event reopened (stages/reopen.py)
    forgotten: int = 0  # tombstones dropped early to keep a partition's under closed_max


class Sessionizer(Reopening):
    tally: Tally

    def __init__(self, store: Store, limits: Limits, *, idle_timeout_s: float, closed_retention_s: float,
                 allowed_lateness_s: float, reopen_window_s: float = 0.0, reopen_max: int = 50_000,
                 closed_max: int = 100_000) -> None:
        self.store = store
        self.reopen_window_s = reopen_window_s  # 0: a closed conversation's turns go at once, nothing reopens
        self.reopen_max = reopen_max  # reopenable conversations kept per partition
        self.reopenable: dict[int, OrderedDict[str, None]] = {}  # per partition, oldest close first
        self.revisions: dict[int, int] = {}  # id(conversation) -> its revision, for those above 1: take_revisions
        self.limits = limits
        self.idle_timeout_s = idle_timeout_s
        self.closed_retention_s = closed_retention_s
        self.allowed_lateness_s = allowed_lateness_s
        self.open: dict[str, Open] = {}
        self.closed: dict[str, Tombstone] = {}
        self.closed_max = closed_max  # tombstones per partition (the oldest forgotten first)
        self.finished: dict[int, OrderedDict[str, None]] = {}  # per partition: tombstones, oldest close first
        self.recent: dict[int, OrderedDict[str, None]] = {}  # per partition: least recently active first
        self.tally = Tally()

    def take_tally(self) -> Tally:
        tally, self.tally = self.tally, Tally()
        return tally

    # --- events ---------------------------------------------------------------------------------

    def turn(self, ev: TurnEvent, partition: int, now: float) -> tuple[Outcome, list[Conversation]]:
        cid = ev.conversation_id
        if cid in self.closed and (after := self._after_close(cid, ev.turn_index, now)) is not None:
            return after, []
        o = self.open.get(cid) or self._create(cid, partition, now)
        self._touch(cid, o, now)
        outcome: Outcome = "ok"
        text = ev.text
        if len(text) > self.limits.max_turn_chars:
            text = text[: self.limits.max_turn_chars] + TRUNCATION_MARK
            outcome = "truncated"
        size = turn_size(text, ev.span, ev.response_id)
        old = o.sizes.get(ev.turn_index)
        chars = o.chars - (old[0] if old else 0) + size[0]
        nbytes = o.nbytes - (old[1] if old else 0) + size[1]
        over = over_cap(self.limits, len(o.sizes) if old is None else 0, chars, nbytes)
        if over is not None:
            o.dropped.add(ev.turn_index)
            self.tally.turns[over] += 1
            self._flag(cid, o, over)
            return "truncated", self._close_if_complete(cid, o, now)
        entry: dict[str, Any] = {"r": ev.role, "x": text, "ts": ev.timestamp}
        meta = self._fit_metadata(cid, o, ev.metadata) if ev.metadata else {}
        feedback = ev.feedback.model_dump(exclude_none=True) if ev.feedback else {}
        if old is not None:  # a turn given again: merged over what is stored
            previous = self.store.get(turn_key(cid, ev.turn_index)) or {}
            meta, feedback = {**previous.get("m", {}), **meta}, {**previous.get("f", {}), **feedback}
        if meta:
            entry["m"] = meta
        if feedback:
            entry["f"] = feedback
        if ev.span:
            entry["sp"] = ev.span
        if ev.response_id:
            entry["ri"] = ev.response_id
        self.store.put(turn_key(cid, ev.turn_index), entry, o.partition)
        o.set_size(ev.turn_index, size)
        o.dropped.discard(ev.turn_index)
        if outcome == "truncated":
            self.tally.turns["max_turn_chars"] += 1
            self._flag(cid, o, "max_turn_chars")
        elif old is not None:
            outcome = "replaced"
        return outcome, self._close_if_complete(cid, o, now)

    def repeats(self, ev: TurnEvent) -> bool:
        """The turn is already stored as given (same role and text) and the event adds no span or response id:
        an OTLP call repeats the whole history, and a repeat must not rewrite (or lose the span of) a turn."""
        o = self.open.get(ev.conversation_id)
        if o is None or ev.turn_index not in o.sizes:
            return False
        entry = self.store.get(turn_key(ev.conversation_id, ev.turn_index))
        if entry is None or entry["r"] != ev.role:
            return False
        text: str = entry["x"]
        cut = text.endswith(TRUNCATION_MARK) and ev.text.startswith(text[:-len(TRUNCATION_MARK)])
        same: bool = text == ev.text or cut
        adds = bool(ev.span and entry.get("sp") != ev.span) or bool(
            ev.response_id and entry.get("ri") != ev.response_id)
        return same and not adds and not ev.feedback and all(o.meta.get(k) == v for k, v in ev.metadata.items())

    def end(self, ev: EndEvent, partition: int, now: float, *, rekeyed: bool,
            raw: bytes | None = None) -> tuple[Outcome, list[Conversation]]:
        """Record the end; close now if complete (or keyed without a count), else wait for the turns."""
        cid = ev.conversation_id
        if cid in self.closed and (after := self._after_close(cid, None, now)) is not None:
            return after, []
        o = self.open.get(cid)
        if o is None and not rekeyed and ev.turn_count is None:
            return "unknown_conversation", []
        if o is None:
            o = self._create(cid, partition, now)
        self._touch(cid, o, now)
        truth = ev.simulated_truth
        if truth is not None and json_bytes(truth) + o.meta_bytes > self.limits.max_metadata_bytes:
            truth = None
            self._flag(cid, o, "max_metadata_bytes")
        o.end = {"ts": ev.timestamp, "n": ev.turn_count, "m": self._fit_metadata(cid, o, ev.metadata),
                 "f": ev.feedback.model_dump(exclude_none=True) if ev.feedback else {}, "st": truth}
        o.end_seen = now
        if not o.sizes and raw is not None and len(raw) <= RAW_END_MAX:  # kept for its dead letter, if no turn comes
            o.end["raw"] = raw.decode("utf-8", "replace")
        if o.complete() or (ev.turn_count is None and not rekeyed and o.sizes):
            return "ok", [self._close(cid, o, "end", now)]
        self.store.put(end_key(cid), o.end, o.partition)
        return "pending", []

    def reject(self, cid: str, rejection: Rejection, partition: int, now: float) -> tuple[Outcome, list[Conversation]]:
        """A turn of ``cid`` was rejected: the conversation is marked incomplete (its first rejection kept) and the
        turn counts as present for ``turn_count``, so its end still closes it. After the close: ``late``."""
        if cid in self.closed:
            return "late", []
        o = self.open.get(cid) or self._create(cid, partition, now)
        self._touch(cid, o, now)
        if rejection.turn_index is not None and rejection.turn_index not in o.sizes:
            o.dropped.add(rejection.turn_index)
        if o.incomplete is None:
            o.incomplete = rejection
            self.store.put(header_key(cid), open_header(o), o.partition)
        return "ok", self._close_if_complete(cid, o, now)

    def sweep(self, now: float, owned: set[int], clock: Callable[[int], float] | None = None) -> Closed:
        """Close idle conversations and ends whose grace passed; forget old tombstones (owned partitions only).
        ``clock``: each partition's time (``now`` for all without it)."""
        out = Closed()
        times = {p: clock(p) if clock is not None else now for p in owned}
        for cid, o in list(self.open.items()):
            if o.partition not in owned:
                continue
            now = times[o.partition]
            grace_over = o.end is not None and not o.end.get("n") and now - o.end_seen > self.allowed_lateness_s
            if grace_over or now - o.last_seen > self.idle_timeout_s:
                self._finish(cid, o, "end" if o.end else "idle", now, out)
        for p in owned:
            self._expire(p, times[p])
        return out

    # --- restore ---------------------------------------------------------------------------------

    def rebuild(self, owned: set[int], now: float) -> None:
        """The in-memory index from the store (after a restart or rebalance); idle clocks restart at ``now``."""
        open_, closed = read_index(self.store, owned, now)
        self.open.clear()
        self.open.update(open_)
        self.closed.clear()
        self.closed.update(closed)
        self.recent.clear()
        for cid, o in open_.items():
            self.recent.setdefault(o.partition, OrderedDict())[cid] = None
        self.reopenable.clear()
        self.finished.clear()
        for _, cid in sorted((t.closed_at, cid) for cid, t in closed.items()):
            self.finished.setdefault(closed[cid].partition, OrderedDict())[cid] = None
            if closed[cid].kept is not None:
                self.reopenable.setdefault(closed[cid].partition, OrderedDict())[cid] = None

    # --- internals -------------------------------------------------------------------------------

    def _create(self, cid: str, partition: int, now: float) -> Open:
        self._make_room(partition, now)
        o = self.open[cid] = Open(partition=partition, last_seen=now)
        self.recent[partition][cid] = None
        self.store.put(header_key(cid), {"p": partition}, partition)
        return o

    def _make_room(self, partition: int, now: float) -> None:
        recent = self.recent.setdefault(partition, OrderedDict())
        while len(recent) >= self.limits.max_open:  # the least recently active finishes now
            oldest = next(iter(recent))
            self._finish(oldest, self.open[oldest], "idle", now, self.tally.evicted)

    def _touch(self, cid: str, o: Open, now: float) -> None:
        o.last_seen = now
        self.recent[o.partition].move_to_end(cid)

    def _finish(self, cid: str, o: Open, reason: Literal["end", "idle"], now: float, out: Closed) -> None:
        """Emit it if it has turns; an end whose turns never came goes to ``out.unknown`` (its dead letter)."""
        if o.sizes:
            out.conversations.append(self._close(cid, o, reason, now))
            return
        if o.end is not None:
            raw = o.end.get("raw")
            out.unknown.append((cid, raw.encode() if raw else orjson.dumps(end_event(cid, o.end)
                                                                          .model_dump(exclude_none=True))))
        self._drop(cid, o, now)

    def _flag(self, cid: str, o: Open, reason: str) -> None:
        """Mark it truncated by ``reason``: counted once per conversation and cap (also across restarts)."""
        if reason not in o.reasons:
            o.truncated = True
            o.reasons.add(reason)
            self.tally.truncated[reason] += 1
            self.store.put(header_key(cid), open_header(o), o.partition)

    def _fit_metadata(self, cid: str, o: Open, metadata: dict[str, str]) -> dict[str, str]:
        """The keys of ``metadata`` that change the merged metadata and fit its cap (the rest: flagged)."""
        kept: dict[str, str] = {}
        for k, v in metadata.items():
            if o.meta.get(k) == v:
                continue
            grown = o.meta_bytes + json_bytes({k: v}) - 1 - (json_bytes({k: o.meta[k]}) - 1 if k in o.meta else 0)
            if grown > self.limits.max_metadata_bytes:
                self._flag(cid, o, "max_metadata_bytes")
                continue
            o.meta[k], o.meta_bytes, kept[k] = v, grown, v
        return kept

    def _close_if_complete(self, cid: str, o: Open, now: float) -> list[Conversation]:
        return [self._close(cid, o, "end", now)] if o.complete() else []

    def _close(self, cid: str, o: Open, reason: Literal["end", "idle"], now: float) -> Conversation:
        conversation = assemble(self.store, cid, o, reason)
        if o.revision != 1:
            self.revisions[id(conversation)] = o.revision
        tombstone = Tombstone(now, o.partition, held_turns(o), reason == "end", o.revision)
        if self.reopen_window_s > 0:
            tombstone = tombstone._replace(kept=tuple(sorted(o.sizes)), prior=inherited(o))
        self._drop(cid, o, now, tombstone)
        return conversation

    def _drop(self, cid: str, o: Open, now: float, tombstone: Tombstone | None = None) -> None:
        """Delete the turn keys (unless kept for reopening) and leave the tombstone (one that held nothing when
        nothing was emitted)."""
        if tombstone is None or tombstone.kept is None:
            for index in o.sizes:
                self.store.delete(turn_key(cid, index), o.partition)
        if o.end is not None and self.store.get(end_key(cid)) is not None:
            self.store.delete(end_key(cid), o.partition)
        tombstone = tombstone or Tombstone(now, o.partition)
        del self.open[cid]
        self._bury(cid, tombstone)
        self.recent[o.partition].pop(cid, None)
        if tombstone.kept is not None:
            self._keep(cid, o.partition)
