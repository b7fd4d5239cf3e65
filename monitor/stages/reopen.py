"""Reopening a scored conversation: what is kept of it after it closed, and the revision that continues it.

A conversation that closed (and was scored) keeps its turns in the sessions store, as they were kept while it was
open (redacted at the input boundary when redaction is on), for ``reopen_window_s``; its tombstone lists the kept
turn indices and what a later revision inherits besides turns (the caps that cut it, its first rejected turn, its
ends' metadata, feedback and simulated truth). A turn or end for it within the window reopens it: a new revision
(one more than the last) holding the whole conversation so far, which closes as any conversation does and is
scored again. At most ``reopen_max_conversations`` closed conversations per partition are kept reopenable (the
oldest stops being reopenable first: its turns are deleted, its tombstone stays), so memory and the changelog stay
bounded whatever the traffic: each kept conversation holds what it held open, within the session caps.

A conversation sent as one record (``type: conversation``) keeps only its tombstone: a later record of it that holds
more turns is its next revision (it carries the whole conversation so far), one that holds no more is a
redelivery, and past the window it is late, as a turn is. Its turn events, if any come, are late: a conversation
continues in the format it came in.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Literal

from monitor.contracts.events import Conversation, Rejection
from monitor.stages.bounds import json_bytes, turn_size
from monitor.stages.session_store import Open, Store, Tombstone, header_key, open_header, turn_key


class Reopening:
    """The sessionizer's part that keeps closed conversations reopenable and reopens them (a mixin of
    :class:`monitor.stages.sessionize.Sessionizer`, whose state it shares)."""

    store: Store
    open: dict[str, Open]
    closed: dict[str, Tombstone]
    recent: dict[int, OrderedDict[str, None]]
    reopenable: dict[int, OrderedDict[str, None]]  # per partition, oldest close first
    reopen_window_s: float
    reopen_max: int
    closed_retention_s: float
    closed_max: int  # tombstones per partition
    finished: dict[int, OrderedDict[str, None]]  # per partition, the tombstones oldest close first
    revisions: dict[int, int]
    tally: Any  # sessionize.Tally: its ``reopened`` and ``forgotten`` counts

    def _make_room(self, partition: int, now: float) -> None:
        raise NotImplementedError

    def take_revisions(self) -> dict[int, int]:
        """The revisions of the conversations closed since the last call (``id(conversation)`` -> revision, above
        1 only): a conversation may close, reopen and close again in one batch, so its id does not say which."""
        revisions, self.revisions = self.revisions, {}
        return revisions

    def partition_of(self, cid: str) -> int:
        """The partition of a conversation that closed (or closed and reopened since)."""
        t = self.closed.get(cid)
        return t.partition if t is not None else self.open[cid].partition

    def late_reason(self, cid: str, now: float, *, whole: bool = False) -> str:
        """``whole``: the late event is a whole conversation (else a turn or an end)."""
        return late_reason(self.closed.get(cid), now, self.reopen_window_s, whole=whole)

    def whole(self, conversation: Conversation, turns: int, partition: int,
              now: float) -> Literal["ok", "redelivered", "late"]:
        """A conversation that came as one record (``turns``: how many it had before the caps), ``ok`` to score as
        its first revision or as the next one of the conversation it continues; its tombstone replaces the last."""
        cid = conversation.conversation_id
        if cid in self.open:  # its id is open as turn events: scored as it came, the open one closes on its own
            return "ok"
        t = self.closed.get(cid)
        revision = 1
        if t is not None:
            if turns <= t.turns:
                return "redelivered"
            if t.kept is None or now - t.closed_at > self.reopen_window_s:  # not (or no longer) reopenable
                return "late"
            if t.kept:  # a conversation of turn events, continued whole: the record holds its turns
                self._unkeep(cid)
            self.reopenable.get(t.partition, OrderedDict()).pop(cid, None)
            revision = t.revision + 1
            self.tally.reopened += 1
            self.revisions[id(conversation)] = revision
        # reopenable within the window and the partition's cap, as a conversation of turn events: past the cap the
        # revision ledger may no longer hold what its last revision counted, so a next one would count twice
        kept = () if self.reopen_window_s > 0 else None
        self._bury(cid, Tombstone(now, partition, turns, True, revision, kept=kept, whole=True))
        if kept is not None:
            self._keep(cid, partition)
        return "ok"

    def _after_close(self, cid: str, turn_index: int | None, now: float) -> Literal["redelivered", "late"] | None:
        """``redelivered``, ``late``, or None when the event reopened the conversation (it is open now)."""
        t = self.closed[cid]
        if t.holds(turn_index):
            return "redelivered"
        if t.kept is None or t.whole or now - t.closed_at > self.reopen_window_s:  # whole: no turns kept
            return "late"
        self._reopen(cid, t, now)
        return None

    def _reopen(self, cid: str, t: Tombstone, now: float) -> None:
        """The conversation's next revision, open from its kept turns (before room is made: making room closes
        another conversation, which may stop this one being kept)."""
        o = reopened(self.store, cid, t, now)
        self.tally.reopened += 1
        del self.closed[cid]
        self.finished[t.partition].pop(cid, None)
        self.reopenable[t.partition].pop(cid, None)
        self._make_room(t.partition, now)
        self.open[cid] = o
        self.recent[t.partition][cid] = None
        self.store.put(header_key(cid), open_header(o), o.partition)

    def _bury(self, cid: str, t: Tombstone) -> None:
        """Its tombstone, the partition's newest; past the partition's cap the oldest is forgotten."""
        self.closed[cid] = t
        self.store.put(header_key(cid), t.header(), t.partition)
        order = self.finished.setdefault(t.partition, OrderedDict())
        order.pop(cid, None)
        order[cid] = None
        while len(order) > self.closed_max:
            self._forget(next(iter(order)))
            self.tally.forgotten += 1

    def _expire(self, partition: int, now: float) -> None:
        """Past the window a conversation is no longer reopenable; past the window and the closed retention its
        tombstone goes. Oldest first, so a sweep touches only what expires."""
        kept = self.reopenable.get(partition)
        while kept and now - self.closed[next(iter(kept))].closed_at > self.reopen_window_s:
            self._unkeep(next(iter(kept)))
        order = self.finished.get(partition)
        while order and now - self.closed[cid := next(iter(order))].closed_at > (self.reopen_window_s +
                                                                                 self.closed_retention_s):
            self._forget(cid)

    def _forget(self, cid: str) -> None:
        """No tombstone any more: a later event of it would start a new conversation under its id."""
        t = self.closed.pop(cid)
        for index in t.kept or ():
            self.store.delete(turn_key(cid, index), t.partition)
        self.store.delete(header_key(cid), t.partition)
        self.finished[t.partition].pop(cid, None)
        self.reopenable.get(t.partition, OrderedDict()).pop(cid, None)

    def _keep(self, cid: str, partition: int) -> None:
        """A closed conversation kept reopenable; past the partition's cap the oldest stops being."""
        kept = self.reopenable.setdefault(partition, OrderedDict())
        kept[cid] = None
        while len(kept) > self.reopen_max:
            self._unkeep(next(iter(kept)))

    def _unkeep(self, cid: str) -> None:
        """No longer reopenable (its window passed, or the partition's cap): its turns go, its tombstone stays."""
        t = self.closed[cid]
        for index in t.kept or ():
            self.store.delete(turn_key(cid, index), t.partition)
        t = self.closed[cid] = t._replace(kept=None, prior=None)
        self.store.put(header_key(cid), t.header(), t.partition)
        self.reopenable.get(t.partition, OrderedDict()).pop(cid, None)


def merged_end(prior: dict[str, Any] | None, end: dict[str, Any] | None) -> dict[str, Any] | None:
    """An earlier revision's ends and this revision's end, merged (this one's values win): metadata, feedback and
    simulated truth, what the next revision keeps of them."""
    if not prior and not end:
        return None
    prior, end = prior or {}, end or {}
    out: dict[str, Any] = {}
    metadata = {**prior.get("m", {}), **end.get("m", {})}
    feedback = {**prior.get("f", {}), **end.get("f", {})}
    truth = end.get("st") if end.get("st") is not None else prior.get("st")
    if metadata:
        out["m"] = metadata
    if feedback:
        out["f"] = feedback
    if truth is not None:
        out["st"] = truth
    return out or None


def inherited(o: Open) -> dict[str, Any] | None:
    """What the next revision of a closing conversation inherits besides its turns."""
    prior: dict[str, Any] = {}
    if o.reasons:
        prior["tr"] = sorted(o.reasons)
    if o.incomplete is not None:
        prior["inc"] = o.incomplete.model_dump(exclude_none=True)
    end = merged_end(o.prior_end, o.end)
    if end:
        prior["pe"] = end
    return prior or None


def reopened(store: Store, cid: str, t: Tombstone, now: float) -> Open:
    """The next revision of a closed conversation, rebuilt from its kept turns (the store's entries are kept)."""
    prior = t.prior or {}
    cut = prior.get("tr")
    o = Open(partition=t.partition, last_seen=now, revision=t.revision + 1, truncated=bool(cut),
             reasons=set(cut or ()), prior_end=prior.get("pe"),
             incomplete=Rejection.model_validate(prior["inc"]) if "inc" in prior else None)
    for index in t.kept or ():
        entry = store.get(turn_key(cid, index))
        if entry is not None:
            o.set_size(index, turn_size(entry["x"], entry.get("sp"), entry.get("ri")))
            o.meta.update(entry.get("m", {}))
    o.dropped = {i for i in range(t.turns) if i not in o.sizes}  # dropped by the caps: they stay dropped
    o.meta.update((o.prior_end or {}).get("m", {}))
    o.meta_bytes = json_bytes(o.meta)
    return o


def late_reason(t: Tombstone | None, now: float, window_s: float, *, whole: bool = False) -> str:
    """Why an event of a closed conversation was not taken: one line for its dead letter (no conversation data)."""
    if t is None:
        return "its conversation closed"
    if window_s <= 0:
        return "its conversation closed and reopening is off (CONVMON_REOPEN_WINDOW_S=0)"
    age = now - t.closed_at
    if age > window_s:
        return f"its conversation closed {_duration(age)} ago, past the {_duration(window_s)} reopen window"
    if t.whole and not whole:
        return "its conversation came as one record: send its next revision as one record too"
    return "its conversation closed and is no longer kept for reopening (CONVMON_REOPEN_MAX_CONVERSATIONS)"


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.3g} h" if seconds >= 3600 else f"{seconds:.0f} s"
