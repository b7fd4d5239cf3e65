"""Per-partition running totals that Prometheus can trust across crashes and rebalances.

A worker's own counters restart at zero with the process and die with it while their dedup marks survive.
Here every input partition keeps running totals (conversations scored, per-item verdicts and probability sums) in
the counts store beside the dedup marks, so the partition's changelog holds both and the engine's checkpoint
commits them with the input offsets that produced them (engine/checkpoint.py). A restore replays only committed
records (engine/changelog.py), so the totals restored are exactly those of the committed batches: no commit
records, no values before a batch, no rollback here.

A record holds one *group*: one family's series that differ only by item (``rubric``, ``polarity``, ``verdict``),
so a scored conversation writes a record per family, not one per item and verdict. Its key is
``#g|[partition, family, group labels]`` and its value ``[partition, family, group labels, [[item labels, value],
...]]``.

Exported values advance only after the checkpoint committed the batch (:meth:`written`), so what Prometheus scraped
never exceeds what the partition's next owner restores: ``max without (instance)`` over the per-partition series
never goes down when a partition moves, and ``increase()`` over it is the number of conversations counted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping

import orjson
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from monitor.contracts.metrics import (
    RESIDUAL_TERMS,
    RETRACTED,
    Metrics,
    PartitionFamily,
    agreement_siblings,
    verdict_siblings,
)
from monitor.stages.sessionize import Store

Series = tuple[str, tuple[str, ...]]  # (Metrics attribute name, label values)
Group = tuple[str, tuple[str, ...]]  # (Metrics attribute name, the label values an item's series share)
GROUP_PREFIX = "#g|"
ITEM_LABELS = frozenset({"rubric", "polarity", "verdict"})  # what varies inside a group
# Written by the releases that logged totals as a transaction (the faust engine, and this engine until then): a
# group's rows carried the value before the batch and its sequence number, and a commit record closed each batch.
# Replay skips uncommitted records, so a row's value is read and the rest ignored; the faust take-over settles
# those batches first (engine/upgrade.py).
COMMIT_PREFIX = "#c|"


def group_key(partition: int, group: Group) -> str:
    return GROUP_PREFIX + orjson.dumps([partition, group[0], list(group[1])]).decode()


class Grouping:
    """Splits a series' labels into its group's and its item's (by the family's label names)."""

    def __init__(self, families: Mapping[str, PartitionFamily] | Iterable[str]) -> None:
        labels = {a: f.labels for a, f in families.items()} if isinstance(families, Mapping) else {}
        self.item_at = {a: tuple(i for i, n in enumerate(names) if n in ITEM_LABELS) for a, names in labels.items()}

    def split(self, series: Series) -> tuple[Group, tuple[str, ...]]:
        attr, labels = series
        at = self.item_at.get(attr, ())
        return (attr, tuple(v for i, v in enumerate(labels) if i not in at)), tuple(labels[i] for i in at)

    def join(self, group: Group, item: Iterable[str]) -> Series:
        attr, shared = group
        at, item_values, shared_values = self.item_at.get(attr, ()), iter(item), iter(shared)
        width = len(shared) + len(at)
        return attr, tuple(next(item_values) if i in at else next(shared_values) for i in range(width))


class PartitionTotals:
    def __init__(self, store: Store, families: Mapping[str, PartitionFamily] | Iterable[str]) -> None:
        self.store = store
        self.families = frozenset(families)
        self.grouping = Grouping(families)
        self._current: dict[int, dict[Series, float]] = {}
        self._members: dict[int, dict[Group, set[Series]]] = {}  # each group's series, per partition
        self._pending: dict[int, dict[Series, float]] = {}  # added, not yet written to the store
        self._unexported: dict[int, dict[Series, float]] = {}  # written to the store, not yet checkpointed
        self._exported: dict[int, dict[Series, float]] = {}
        self._lock = threading.Lock()  # the collector reads _exported from the HTTP server's thread

    def owns(self, partition: int) -> bool:
        return partition in self._current

    def add(self, partition: int, tally: Mapping[Series, float]) -> None:
        """Add a batch's increments (only the totalled families) to the open batch of ``partition``."""
        if partition not in self._current:
            return  # not (or no longer) owned: the partition's owner counts it
        pending = self._pending.setdefault(partition, {})
        for series, amount in tally.items():
            if series[0] in self.families and amount:
                pending[series] = pending.get(series, 0.0) + amount

    def commit(self, partition: int) -> None:
        """Write the groups the open batch changed to the store; exported once checkpointed (:meth:`written`)."""
        if partition not in self._current:
            return
        current = self._current[partition]
        members = self._members.setdefault(partition, {})
        changed: dict[Series, float] = {}
        for series, amount in self._pending.pop(partition, {}).items():
            current[series] = changed[series] = current.get(series, 0.0) + amount
            members.setdefault(self.grouping.split(series)[0], set()).add(series)
        for group in {self.grouping.split(series)[0] for series in changed}:
            rows = [[list(self.grouping.split(m)[1]), current[m]] for m in sorted(members[group])]
            self.store.put(group_key(partition, group), [partition, group[0], list(group[1]), rows], partition)
        self._unexported.setdefault(partition, {}).update(changed)

    def written(self) -> Callable[[], None]:
        """Every total written so far; the call returned exports them. The checkpoint takes it before it flushes
        and calls it once the batch's offsets are committed; checkpoints run one at a time, so in order."""
        batch, self._unexported = self._unexported, {}
        with self._lock:
            targets = [(p, self._exported.get(p), values) for p, values in batch.items()]

        def durable() -> None:
            with self._lock:
                for partition, target, values in targets:
                    # revoked since (and maybe owned again, from a restore): nothing of the old ownership goes out
                    if target is not None and self._exported.get(partition) is target:
                        target.update(values)
        return durable

    def rebuild(self, owned: set[int]) -> None:
        """The totals of ``owned`` from the restored store (committed records only)."""
        current: dict[int, dict[Series, float]] = {p: {} for p in owned}
        for key, value in list(self.store.items()):
            if key.startswith(COMMIT_PREFIX) and isinstance(value, dict) and value.get("partition") in owned:
                self.store.delete(key, int(value["partition"]))  # an earlier release's commit record
            elif key.startswith(GROUP_PREFIX) and isinstance(value, list) and len(value) >= 4 and value[0] in owned:
                partition, family, shared, rows = value[:4]  # a fifth field: the batch, of an earlier release
                group = (str(family), tuple(str(v) for v in shared))
                for row in rows:
                    current[partition][self.grouping.join(group, (str(v) for v in row[0]))] = float(row[1])
        self._current = current
        self._members = {p: {} for p in owned}
        for p, values in current.items():
            for series in values:
                self._members[p].setdefault(self.grouping.split(series)[0], set()).add(series)
        self._pending = {}
        self._unexported = {}
        with self._lock:
            self._exported = {p: dict(values) for p, values in current.items()}

    def revoke(self, partitions: Iterable[int]) -> None:
        """Stop exporting (and counting) partitions this worker no longer owns."""
        with self._lock:
            for p in partitions:
                for state in (self._current, self._members, self._pending, self._unexported, self._exported):
                    state.pop(p, None)

    def exported(self) -> dict[int, dict[Series, float]]:
        """A copy of the checkpointed totals of the owned partitions."""
        with self._lock:
            return {p: dict(values) for p, values in self._exported.items()}


def with_retraction_twins(values: dict[Series, float]) -> dict[Series, float]:
    """``values`` and, at 0, the retraction twin of every series (and of the verdict siblings and residual terms
    the collector creates at 0) that has none yet."""
    out = dict(values)
    for (name, labels) in values:
        if name.endswith(RETRACTED):
            continue
        twins = [labels] + (verdict_siblings(labels) if name == "verdicts" else
                            agreement_siblings(labels) if name == "agreement_pairs" else [])
        names = [name] + ([t for t in RESIDUAL_TERMS if t != name] if name == "residual_weight" else [])
        for n in names:
            for twin in twins:
                out.setdefault((n + RETRACTED, twin), 0.0)
    return out


class TotalsCollector(Collector):
    """Exports the owned partitions' acknowledged totals, with a ``partition`` label, at scrape time."""

    def __init__(self, totals: PartitionTotals, metrics: Metrics, *, retracting: bool = False) -> None:
        self.totals = totals
        self.families = metrics.partition_families
        # reopening on: every series' retraction twin is exported from 0 beside it, so increase() sees its first
        # retraction (a series born at 1 hides it)
        self.retracting = retracting

    def describe(self) -> Iterable[Metric]:
        return []  # no fixed samples: the owned partitions change with rebalances

    def collect(self) -> Iterator[Metric]:
        metrics = {attribute: CounterMetricFamily(family.name, family.documentation,
                                                  labels=["partition", *family.labels])
                   for attribute, family in self.families.items()}
        for partition, values in self.totals.exported().items():  # one pass: this runs on every scrape
            label = str(partition)
            paired: set[tuple[str, ...]] = set()  # agreement siblings exported at 0 (one per item and pair)
            if self.retracting:
                values = with_retraction_twins(values)
            for (name, labels), value in values.items():
                metric = metrics.get(name)
                if metric is not None:
                    metric.add_metric([label, *labels], value)
                    if name == "verdicts":  # a yes/no series absent so far is exported at 0 (see verdict_siblings)
                        for sibling in verdict_siblings(labels):
                            if ("verdicts", sibling) not in values:
                                metric.add_metric([label, *sibling], 0.0)
                    elif name == "agreement_pairs":  # so are the item's other (judge, distilled) pairs
                        for sibling in agreement_siblings(labels):
                            if ("agreement_pairs", sibling) not in values and sibling not in paired:
                                paired.add(sibling)
                                metric.add_metric([label, *sibling], 0.0)
                    elif name == "residual_weight":  # the terms born later (a first yes) start at 0, as verdicts
                        for term in RESIDUAL_TERMS:
                            if (term, labels) not in values:
                                metrics[term].add_metric([label, *labels], 0.0)
        yield from metrics.values()
