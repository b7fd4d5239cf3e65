"""Counting a conversation once, by its latest revision.

A conversation the user came back to is scored again (stages/reopen.py): revision 2, 3, ... Its score ids carry
the revision (``contracts/score_codec.score_id``), so the dedup window counts each revision once; this ledger
makes the totals count only the latest. Per (scorer, conversation) it keeps the revision last counted in the
partition's totals and what that record added to them; counting a later revision adds, in the same batch (so the
same checkpoint), the earlier one's increments to the *retraction* twins of the families
(``<family>_retracted``, contracts/metrics.py), which the recording rules subtract. A record of a revision at or
below the one counted (a verdict that arrives after a later revision's verdict was counted) is stored on the
scores topic but not counted.

Entries live in the counts store beside the dedup marks and totals, so they are logged, restored and committed
with them: ``#r|<scorer>:<conversation id>`` = ``[partition, revision, counted at, series]``, where ``series`` is
the record's totalled series as one JSON string (``[[family, labels, amount], ...]``): read only when a later
revision retracts it, a string holds it in a fifth of the memory nested lists take, and one ``orjson.dumps`` of
the record's increments writes it (bench/reopen_state.py measures both). Bounded like the dedup window: an entry lives
``retention_s`` (the reopen window and the closed retention after it: no revision can come later) and a
partition keeps at most ``max_keys``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import orjson

from monitor.contracts.metrics import RETRACTED
from monitor.contracts.scores import ScoreRecord
from monitor.stages.export import Exporter
from monitor.stages.session_store import Store
from monitor.stages.totals import Series

LEDGER_PREFIX = "#r|"


def ledger_key(record: ScoreRecord) -> str:
    return f"{LEDGER_PREFIX}{record.scorer}:{record.conversation_id}"


class Revisions:
    def __init__(self, store: Store, families: frozenset[str], *, retention_s: float, max_keys: int,
                 enabled: bool) -> None:
        self.store = store
        self.families = frozenset(f for f in families if not f.endswith(RETRACTED))  # what a record adds
        self.retention_s, self.max_keys = retention_s, max_keys
        self.enabled = enabled  # reopening on: every counted record is kept, its conversation may come back
        self._marks: dict[int, OrderedDict[str, float]] = {}  # per partition: key -> counted at, oldest first

    def stale(self, record: ScoreRecord) -> bool:
        """Whether this or a later revision of the conversation is already counted for the record's scorer."""
        entry = self.store.get(ledger_key(record))
        return entry is not None and int(entry[1]) >= record.revision

    def supersede(self, record: ScoreRecord, partition: int, tally: Mapping[Series, float],
                  now: float) -> dict[Series, float]:
        """Keep ``record`` as its conversation's counted revision (``tally``: what it added); what the revision it
        replaces added, as increments of the retraction families (empty when it replaces none)."""
        key = ledger_key(record)
        previous = self.store.get(key)
        retract: dict[Series, float] = {}
        for family, labels, amount in orjson.loads(previous[3]) if previous is not None else ():
            retract[(family + RETRACTED, tuple(labels))] = float(amount)
        if not self.enabled:
            return retract
        families = self.families
        rows = [series + (amount,) for series, amount in tally.items() if series[0] in families and amount]
        self.store.put(key, [partition, record.revision, now, orjson.dumps(rows).decode()], partition)
        marks = self._marks.setdefault(partition, OrderedDict())
        marks.pop(key, None)
        marks[key] = now
        while marks and (len(marks) > self.max_keys or now - next(iter(marks.values())) > self.retention_s):
            old, _ = marks.popitem(last=False)
            self.store.delete(old, partition)
        return retract

    def size(self, partition: int) -> int:
        return len(self._marks.get(partition, ()))

    def rebuild(self, owned: set[int]) -> None:
        """The entries' order from the restored store (after a restart or rebalance), oldest first."""
        entries = sorted((float(v[2]), int(v[0]), key) for key, v in list(self.store.items())
                         if key.startswith(LEDGER_PREFIX) and isinstance(v, list) and len(v) == 4 and v[0] in owned)
        self._marks = {}
        for counted_at, partition, key in entries:
            self._marks.setdefault(partition, OrderedDict())[key] = counted_at


def counted(exporter: Exporter, revisions: Revisions | None, batch: Sequence[ScoreRecord], partition: int,
            now: float, shadows: Mapping[str, Mapping[str, float]] | None = None) -> dict[tuple[str, tuple[str, ...]],
                                                                                       float]:
    """A batch's increments for its partition's totals: the records' own, and (reopening on) the retraction of
    what the revisions they replace had added, so both commit in one batch."""
    if revisions is None or not revisions.enabled:
        return exporter.observe_batch(batch, shadows)
    each: list[dict[tuple[str, tuple[str, ...]], float]] = []
    tally = exporter.observe_batch(batch, shadows, each=each)
    for record, own in zip(batch, each, strict=True):
        for series, amount in revisions.supersede(record, partition, own, now).items():
            tally[series] = tally.get(series, 0.0) + amount
    return tally
