"""Per-partition running totals: logged with the dedup marks, exported once checkpointed, restored exactly from
the committed changelog (the engine replays only committed records: tests/engine), exported by the owner only."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import PARTITION_ONLY, RETRACTED, Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.hotpath import HotPath
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals, TotalsCollector
from tests.support.memstore import MemStore

RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)
SCORED = "convmon_partition_conversations_scored_total"
VERDICTS = "convmon_partition_rubric_verdicts_total"


class LogStore:
    """A changelog: every write in order, through orjson (the changelog codec); ``prefix(n)`` is what a broker kept
    when a crash lost every write after the n-th. ``ack_all()``: a checkpoint committed every write so far, and
    exports the totals of the workers over this store (engine/checkpoint.py)."""

    def __init__(self, log: list[tuple[str, Any]] | None = None) -> None:
        self.log: list[tuple[str, Any]] = []
        self.data: dict[str, Any] = {}
        self.totals: list[PartitionTotals] = []
        for key, value in log or []:
            self._write(key, value)

    def _write(self, key: str, value: Any) -> None:
        self.log.append((key, value))
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = orjson.loads(orjson.dumps(value))

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any, partition: int) -> None:
        self._write(key, value)

    def delete(self, key: str, partition: int) -> None:
        self._write(key, None)

    def items(self) -> Iterable[tuple[str, Any]]:
        return list(self.data.items())

    def ack_all(self) -> None:
        for totals in self.totals:
            totals.written()()

    def prefix(self, n: int) -> LogStore:
        return LogStore(self.log[:n])


def record(cid: str, scorer: str = "distilled", p: float = 0.8) -> ScoreRecord:
    items = [ItemResult(item_id=i.id, polarity=i.polarity, probability=p, verdict=p >= 0.5) for i in RUBRIC.items]
    return ScoreRecord(conversation_id=cid, scorer=scorer, judge="hashing", rubric_set=RUBRIC.id,
                       rubric_version=RUBRIC.version, model_version="v", items=items, R=0.0)


def worker(store: Any, owned: set[int]) -> tuple[HotPath, Metrics]:
    """A worker's counting path over ``store`` (the scored table), owning ``owned``, its totals collected."""
    metrics = Metrics(CollectorRegistry())
    totals = PartitionTotals(store, metrics.partition_families)
    store.totals.append(totals)
    metrics.registry.register(TotalsCollector(totals, metrics))
    dedup = DedupWindow(store, window_s=1e6, max_keys=10_000)
    sessions = Sessionizer(MemStore(), Limits(), idle_timeout_s=10.0, closed_retention_s=60.0, allowed_lateness_s=2.0)
    hot = HotPath(sessions, dedup, totals, Exporter(metrics, dimensions=[], cap=5, rubric=RUBRIC), metrics, RUBRIC,
                  max_event_bytes=10_000, max_request_bytes=1 << 20, sample_rate=0.0)
    hot.assign(owned, now=0.0)
    return hot, metrics


def partition_value(metrics: Metrics, partition: int, name: str = SCORED, scorer: str = "distilled") -> float | None:
    return metrics.registry.get_sample_value(name, {"partition": str(partition), "scorer": scorer})


def test_totals_are_exported_per_partition_once_the_commit_is_acknowledged() -> None:
    store = LogStore()
    hot, metrics = worker(store, {0, 1})
    ids = [f"c{i}" for i in range(10)]
    hot.count([record(c) for c in ids], {c: i % 2 for i, c in enumerate(ids)}, now=1.0)
    # counted in-process at once (the per-worker counter), exported per partition only once acknowledged
    assert metrics.registry.get_sample_value("convmon_conversations_scored_total", {"scorer": "distilled"}) == 10
    assert partition_value(metrics, 0) is None and partition_value(metrics, 1) is None
    store.ack_all()
    assert partition_value(metrics, 0) == 5 and partition_value(metrics, 1) == 5
    item = RUBRIC.items[0]
    labels = {"partition": "0", "rubric": item.id, "polarity": item.polarity, "scorer": "distilled", "verdict": "yes"}
    assert metrics.registry.get_sample_value(VERDICTS, labels) == 5
    hot.count([record(c) for c in ids[:4]], {c: i % 2 for i, c in enumerate(ids)}, now=2.0)  # duplicates
    store.ack_all()
    assert partition_value(metrics, 0) == 5
    assert metrics.registry.get_sample_value("convmon_duplicate_scores_total", {"scorer": "distilled"}) == 4


def test_a_revoked_partition_disappears_and_its_new_owner_exports_the_restored_total() -> None:
    store = LogStore()
    old, old_metrics = worker(store, {0, 1})
    old.count([record(f"a{i}") for i in range(3)], dict.fromkeys((f"a{i}" for i in range(3)), 1), now=1.0)
    store.ack_all()
    old.revoke({1})
    assert partition_value(old_metrics, 1) is None
    new, new_metrics = worker(store.prefix(len(store.log)), {1})
    assert partition_value(new_metrics, 1) == 3


@pytest.mark.parametrize("scorer", ["distilled", "llm"])
def test_a_crash_after_any_checkpoint_restores_totals_that_recount_to_the_truth(scorer: str) -> None:
    """Three batches, a checkpoint after each; a crash loses what followed a checkpoint (the engine's restore skips
    records past the committed offsets): the restarted worker's totals are at least what Prometheus scraped, and
    re-delivering the lost batches counts each conversation exactly once."""
    ids = [f"{scorer}-{i}" for i in range(12)]
    partitions = {c: i % 3 for i, c in enumerate(ids)}
    batches = [ids[:4], ids[4:8], ids[8:]]
    store = LogStore()
    hot, metrics = worker(store, {0, 1, 2})
    checkpoints = [(len(store.log), {p: partition_value(metrics, p, scorer=scorer) for p in range(3)})]
    for batch in batches:
        hot.count([record(c, scorer) for c in batch], partitions, now=1.0)
        store.ack_all()
        checkpoints.append((len(store.log), {p: partition_value(metrics, p, scorer=scorer) for p in range(3)}))
    truth = {p: sum(1 for c in ids if partitions[c] == p) for p in range(3)}
    for done, (cut, scraped) in enumerate(checkpoints):
        kept = store.prefix(cut)
        restarted, m = worker(kept, {0, 1, 2})
        for p in range(3):  # never below what Prometheus scraped from the killed worker
            assert (partition_value(m, p, scorer=scorer) or 0) >= (scraped[p] or 0)
        for batch in batches:  # the input after the committed offsets is read again; earlier ids are duplicates
            restarted.count([record(c, scorer) for c in batch], partitions, now=3.0)
        kept.ack_all()
        assert {p: partition_value(m, p, scorer=scorer) or 0 for p in range(3)} == truth, f"after checkpoint {done}"
        _, again = worker(kept.prefix(len(kept.log)), {0, 1, 2})  # and a later restart agrees
        assert {p: partition_value(again, p, scorer=scorer) for p in range(3)} == truth


def test_marks_and_totals_of_the_release_that_numbered_batches_are_read() -> None:
    """That release's marks had a third field (the batch), its group rows the value before the batch, and a commit
    record closed each batch: replay keeps only committed records, so values are read and the rest dropped."""
    rows = [[[], 3.0, 2.0]]
    store = LogStore([("distilled:old", [1.0, 0, 4]), ('#g|[0,"scored",["distilled"]]', [0, "scored", ["distilled"],
                                                                                         rows, 4]),
                      ("#c|0", {"partition": 0, "seq": 4})])
    hot, metrics = worker(store, {0})
    assert partition_value(metrics, 0) == 3
    assert "#c|0" not in store.data  # deleted: this release writes none
    hot.count([record("old"), record("new")], {"old": 0, "new": 0}, now=2.0)
    store.ack_all()
    assert metrics.registry.get_sample_value("convmon_duplicate_scores_total", {"scorer": "distilled"}) == 1
    assert partition_value(metrics, 0) == 4
    assert store.data["distilled:new"] == [2.0, 0]


def test_the_collector_declares_partition_first_then_the_mirrored_labels() -> None:
    metrics = Metrics(CollectorRegistry(), dimensions=("app",))
    families = metrics.partition_families
    assert families["scored"].labels == ("scorer", "app")
    assert families["verdicts"].labels == ("rubric", "polarity", "scorer", "verdict", "app")
    store = LogStore()
    totals = PartitionTotals(store, families)
    store.totals.append(totals)
    totals.rebuild({2})
    totals.add(2, {("scored", ("llm", "web")): 2.0, ("scored_weight", ("llm",)): 4.0})  # untotalled family ignored
    totals.add(3, {("scored", ("llm", "web")): 1.0})  # not owned: not counted here
    totals.commit(2)
    totals.commit(3)
    store.ack_all()
    collected = list(TotalsCollector(totals, metrics).collect())
    assert {f.name for f in collected} == {f.name for f in families.values()}
    [scored] = [f for f in collected if f.name == "convmon_partition_conversations_scored"]
    assert [(s.name, s.labels, s.value) for s in scored.samples] == [
        ("convmon_partition_conversations_scored_total", {"partition": "2", "scorer": "llm", "app": "web"}, 2.0)]


def test_a_scored_conversation_writes_one_total_record_per_family_not_one_per_item() -> None:
    """Per-item records made the totals most of the worker's changelog traffic (21 per judged conversation)."""
    store = LogStore()
    hot, metrics = worker(store, {0})
    before = len(store.log)
    hot.count([record("x")], {"x": 0}, now=1.0)
    written = [key for key, _ in store.log[before:]]
    distilled_families = {f for f in metrics.partition_families  # residuals, pairs: judge records only;
                          if f not in PARTITION_ONLY and not f.endswith(RETRACTED)}  # retractions: a revision's only
    assert sum(key.startswith("#g|") for key in written) == len(distilled_families) == 3
    assert not any(key.startswith(("#t|", "#c|")) for key in written)
    store.ack_all()
    item = RUBRIC.items[-1]
    labels = {"partition": "0", "rubric": item.id, "polarity": item.polarity, "scorer": "distilled", "verdict": "yes"}
    assert metrics.registry.get_sample_value(VERDICTS, labels) == 1


def test_per_series_records_of_releases_before_groups_are_no_longer_read() -> None:
    store = LogStore([('#t|[0,"scored",["distilled"]]', [0, "scored", ["distilled"], 7.0, 7.0, 1]),
                      ("#c|0", {"partition": 0, "seq": 1})])
    _, metrics = worker(store, {0})
    assert partition_value(metrics, 0) is None


def test_an_acknowledgement_from_before_a_revocation_exports_nothing_of_the_new_ownership() -> None:
    store = LogStore()
    hot, metrics = worker(store, {0})
    hot.count([record("a")], {"a": 0}, now=1.0)
    old = hot.totals.written()
    hot.revoke({0})
    hot.assign({0}, now=2.0)  # owned again: restored from the store (which holds a's batch)
    hot.count([record("b")], {"b": 0}, now=2.0)  # batch of the new ownership, not acknowledged yet
    old()
    assert partition_value(metrics, 0) == 1
    store.ack_all()
    assert partition_value(metrics, 0) == 2


def test_a_dimensioned_verdict_series_appears_with_its_yes_and_no_siblings_at_zero() -> None:
    """A series born at 1 hides its first count from increase(); with dimensions, every new combination's
    first "yes" was one (the demo's judge read a 5 % DSAT rate as 0-2 %)."""
    metrics = Metrics(CollectorRegistry(), dimensions=("app",))
    store = LogStore()
    totals = PartitionTotals(store, metrics.partition_families)
    store.totals.append(totals)
    metrics.registry.register(TotalsCollector(totals, metrics))
    dedup = DedupWindow(store, window_s=1e6, max_keys=10_000)
    sessions = Sessionizer(MemStore(), Limits(), idle_timeout_s=10.0, closed_retention_s=60.0, allowed_lateness_s=2.0)
    exporter = Exporter(metrics, dimensions=["app"], cap=5, rubric=RUBRIC, allowed_values={"app": ["web"]})
    hot = HotPath(sessions, dedup, totals, exporter, metrics, RUBRIC,
                  max_event_bytes=10_000, max_request_bytes=1 << 20, sample_rate=0.0)
    hot.assign({0}, now=0.0)
    item = RUBRIC.items[0]

    def verdicts(name: str, verdict: str, **extra: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"rubric": item.id, "polarity": item.polarity,
                                                        "scorer": "distilled", "verdict": verdict, "app": "web",
                                                        **extra})

    no = record("c0", p=0.1).model_copy(update={"metadata": {"app": "web"}})
    hot.count([no], {"c0": 0}, now=1.0)
    store.ack_all()
    assert verdicts("convmon_rubric_verdicts_total", "no") == 1
    assert verdicts("convmon_rubric_verdicts_total", "yes") == 0
    assert verdicts(VERDICTS, "no", partition="0") == 1
    assert verdicts(VERDICTS, "yes", partition="0") == 0
    assert verdicts(VERDICTS, "uncertain", partition="0") is None  # only the two every scorer gives
    yes = record("c1", p=0.9).model_copy(update={"metadata": {"app": "web"}})
    hot.count([yes], {"c1": 0}, now=2.0)
    store.ack_all()
    assert verdicts(VERDICTS, "yes", partition="0") == 1 and verdicts(VERDICTS, "no", partition="0") == 1
