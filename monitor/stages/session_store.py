"""How a session lives in the store: its keys, the in-memory index of an open one, and the way back.

Each turn is written once under ``t|<cid>|<index>``, a header under ``s|<cid>`` (a tombstone once closed)
and a pending end under ``e|<cid>``. :func:`read_index` rebuilds :class:`Open` from those keys after a
restart or rebalance, and :func:`assemble` turns the stored entries into the finished ``Conversation``.
The :class:`monitor.stages.sessionize.Sessionizer` decides when; this module only knows the layout.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from monitor.contracts.events import Conversation, EndEvent, Feedback, Rejection, Turn
from monitor.contracts.trusted import trusted
from monitor.stages.bounds import TRUNCATION_MARK as TRUNCATION_MARK
from monitor.stages.bounds import json_bytes, turn_size


class Store(Protocol):
    """Key-value state whose writes name the partition they belong to (the changelog partition)."""

    def get(self, key: str) -> Any: ...
    def put(self, key: str, value: Any, partition: int) -> None: ...
    def delete(self, key: str, partition: int) -> None: ...
    def items(self) -> Iterable[tuple[str, Any]]: ...


class DictStore:
    """A plain dict as the store (tools, tests, offline sessionizing); partitions are not needed there."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        self.data[key] = value

    def delete(self, key: str, partition: int) -> None:
        self.data.pop(key, None)

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.data.items())


def header_key(cid: str) -> str:
    return f"s|{cid}"


def turn_key(cid: str, index: int) -> str:
    return f"t|{cid}|{index}"


def end_key(cid: str) -> str:
    return f"e|{cid}"


@dataclass
class Open:
    """What the hot path keeps in memory about one open conversation (rebuilt from the store)."""

    partition: int
    last_seen: float
    sizes: dict[int, tuple[int, int]] = field(default_factory=dict)  # turn index -> (chars, JSON bytes): set_size
    chars: int = 0  # the sums of ``sizes``, kept as turns come (summing per turn is quadratic in a conversation)
    nbytes: int = 0
    dropped: set[int] = field(default_factory=set)  # indices dropped by the caps (this process's lifetime)
    meta: dict[str, str] = field(default_factory=dict)
    meta_bytes: int = 2
    truncated: bool = False
    reasons: set[str] = field(default_factory=set)  # the caps that cut it (stored in the header's "tr")
    incomplete: Rejection | None = None  # its first rejected turn (stored in the header's "inc")
    end: dict[str, Any] | None = None
    end_seen: float = 0.0
    revision: int = 1  # one more each time the conversation was reopened after it was scored (stages/reopen.py)
    prior_end: dict[str, Any] | None = None  # a reopened conversation's earlier ends: metadata, feedback, truth

    def set_size(self, index: int, size: tuple[int, int]) -> None:
        old = self.sizes.get(index, (0, 0))
        self.chars += size[0] - old[0]
        self.nbytes += size[1] - old[1]
        self.sizes[index] = size

    def complete(self) -> bool:
        count = self.end.get("n") if self.end else None
        if not count:
            return False
        have = sum(1 for i in (*self.sizes, *self.dropped) if i < count)
        return have >= int(count)


class Tombstone(NamedTuple):
    """A closed conversation, while its header lives: when and where it closed, and what it was emitted with,
    so an event of it that comes again (a batch re-delivered before its offsets committed) is told from late
    data. ``turns``: every index below it was in the conversation; ``ended``: it closed on its end event."""

    closed_at: float
    partition: int
    turns: int = 0
    ended: bool = False
    revision: int = 1
    kept: tuple[int, ...] | None = None  # the turn indices kept in the store for reopening (None: not reopenable)
    prior: dict[str, Any] | None = None  # what a reopened revision inherits besides turns (stages/reopen.py)
    whole: bool = False  # it came as one record: its next revision comes whole too (stages/reopen.py)

    def holds(self, turn_index: int | None) -> bool:
        """Whether the event (a turn's index, or None for an end) was part of the conversation when it closed."""
        return self.ended if turn_index is None else turn_index < self.turns

    def header(self) -> dict[str, Any]:
        header: dict[str, Any] = {"p": self.partition, "c": self.closed_at, "n": self.turns}
        if self.ended:
            header["e"] = 1
        if self.revision != 1:
            header["v"] = self.revision
        if self.kept is not None:
            header["k"] = list(self.kept)
        if self.prior:
            header["x"] = self.prior
        if self.whole:
            header["w"] = 1
        return header


def held_turns(o: Open) -> int:
    """The first turn index the conversation does not have (stored or dropped by the caps): all below it it had."""
    have = {*o.sizes, *o.dropped}
    n = 0
    while n in have:
        n += 1
    return n


def read_index(store: Store, owned: set[int], now: float) -> tuple[dict[str, Open], dict[str, Tombstone]]:
    """The open sessions and tombstones of the ``owned`` partitions, as kept in ``store`` (a tombstone written
    before it recorded its turns holds none: every event of it is late, as it was then)."""
    open_: dict[str, Open] = {}
    closed: dict[str, Tombstone] = {}
    turns: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    ends: dict[str, dict[str, Any]] = {}
    for key, value in list(store.items()):
        kind, _, rest = key.partition("|")
        if kind == "s" and isinstance(value, dict) and value.get("p") in owned:
            if "c" in value:
                kept = value.get("k")
                closed[rest] = Tombstone(float(value["c"]), int(value["p"]), int(value.get("n", 0)),
                                         bool(value.get("e")), int(value.get("v", 1)),
                                         tuple(int(i) for i in kept) if isinstance(kept, list) else None,
                                         value.get("x"), bool(value.get("w")))
            else:
                cut = value.get("tr")  # a list of reasons; 1 from releases before reasons were kept
                open_[rest] = Open(partition=int(value["p"]), last_seen=now, truncated=bool(cut),
                                   reasons=set(cut) if isinstance(cut, list) else set(),
                                   incomplete=Rejection.model_validate(value["inc"]) if "inc" in value else None,
                                   revision=int(value.get("v", 1)), prior_end=value.get("pe"))
        elif kind == "t":
            cid, _, index = rest.rpartition("|")
            turns.setdefault(cid, []).append((int(index), value))
        elif kind == "e":
            ends[rest] = value
    for cid, o in open_.items():
        for i, entry in sorted(turns.get(cid, [])):
            o.set_size(i, turn_size(entry["x"], entry.get("sp"), entry.get("ri")))
            o.meta.update(entry.get("m", {}))
        o.meta.update((o.prior_end or {}).get("m", {}))
        o.meta_bytes = json_bytes(o.meta)
        if cid in ends:
            o.end, o.end_seen = ends[cid], now
    return open_, closed


_TURN_FIELDS, _CONVERSATION_FIELDS = frozenset(Turn.model_fields), frozenset(Conversation.model_fields)


def assemble(store: Store, cid: str, o: Open, reason: Literal["end", "idle"]) -> Conversation:
    """Built from already-validated parts without re-validation (contracts/trusted.py); metadata merges in turn
    order, end last."""
    turns: list[Turn] = []
    metadata: dict[str, str] = {}
    feedback: dict[str, Any] = {}
    first = last = None
    for index in sorted(o.sizes):
        entry = store.get(turn_key(cid, index))
        ts = entry["ts"]
        turns.append(trusted(Turn, {"index": index, "role": entry["r"], "text": entry["x"], "timestamp": ts,
                                    "span": entry.get("sp"), "response_id": entry.get("ri")}, _TURN_FIELDS))
        metadata.update(entry.get("m", {}))
        feedback.update(entry.get("f", {}))
        first = ts if first is None else min(first, ts)
        last = ts if last is None else max(last, ts)
    end, prior = o.end or {}, o.prior_end or {}
    truth = end.get("st") if end.get("st") is not None else prior.get("st")
    for earlier in (prior, end):  # a reopened conversation's earlier ends, then its own
        metadata.update(earlier.get("m", {}))
        feedback.update(earlier.get("f", {}))
    return trusted(Conversation, {
        "type": "conversation", "conversation_id": cid, "turns": turns,
        "feedback": Feedback.model_construct(**feedback) if feedback else None, "metadata": metadata,
        "started_at": first, "ended_at": end.get("ts", last), "end_reason": reason, "truncated": o.truncated,
        "simulated_truth": truth, "incomplete": o.incomplete}, _CONVERSATION_FIELDS)


def open_header(o: Open) -> dict[str, Any]:
    """An open conversation's header: its partition, the caps that cut it, its first rejected turn."""
    header: dict[str, Any] = {"p": o.partition}
    if o.reasons:
        header["tr"] = sorted(o.reasons)
    if o.incomplete is not None:
        header["inc"] = o.incomplete.model_dump(exclude_none=True)
    if o.revision != 1:
        header["v"] = o.revision
    if o.prior_end:
        header["pe"] = o.prior_end
    return header


def end_event(cid: str, end: dict[str, Any]) -> EndEvent:
    """The end event a pending end was stored from (for its dead letter when no turn ever came)."""
    return EndEvent.model_construct(
        type="end", conversation_id=cid, timestamp=end["ts"], turn_count=end.get("n"),
        metadata=end.get("m", {}), feedback=Feedback.model_construct(**end["f"]) if end.get("f") else None,
        simulated_truth=end.get("st"))
