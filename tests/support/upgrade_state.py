"""The hot path's state as a worker of one release leaves it, for tests/stages/test_upgrade_state.py.

Run from a checkout of the release (it uses only what every release since 9858d22 has):
``git archive COMMIT | tar -x -C DIR && (cd DIR && PYTHONPATH=. python /path/to/upgrade_state.py OUT COMMIT)``.
It writes the ``sessions`` and ``scored`` tables (as their changelogs restore them: through faust's JSON codec)
and the partition totals the worker exported, after: two open conversations (one cut by max_turns) and two
finished, scored ones (one by both scorers).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.scores import ScoreRecord
from monitor.contracts.settings import Settings
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.hotpath import HotPath, Input
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals
from tests.support.memstore import MemStore

T0 = 1_800_000_000.0
OWNED = {0, 1}
RUBRIC: RubricSet = load_rubric_set("spur-copilot", Settings().prompts_dir)


def turn(cid: str, i: int) -> bytes:
    return orjson.dumps({"conversation_id": cid, "turn_index": i, "role": "user" if i % 2 == 0 else "assistant",
                         "text": f"text {i}", "timestamp": T0 + i})


def end(cid: str) -> bytes:
    return orjson.dumps({"type": "end", "conversation_id": cid, "timestamp": T0 + 30})


def record(cid: str, scorer: str = "distilled") -> ScoreRecord:
    items = [{"item_id": i.id, "polarity": i.polarity, "probability": 0.8 if j % 2 else 0.1, "verdict": j % 2 == 1}
             if scorer == "distilled" else {"item_id": i.id, "polarity": i.polarity, "verdict": j % 3 == 0,
                                            "score": 7.0 if j % 3 == 0 else 0.0} for j, i in enumerate(RUBRIC.items)]
    return ScoreRecord.model_validate({"conversation_id": cid, "scorer": scorer, "judge": "hashing",
                                       "rubric_set": RUBRIC.id, "rubric_version": RUBRIC.version,
                                       "model_version": "v1", "items": items, "R": 0.5, "scored_at": T0 + 31})


def worker(sessions: MemStore, counts: MemStore) -> tuple[HotPath, Metrics]:
    """A hot path as runtime/components.py builds one (the caps small enough to cut a conversation)."""
    metrics = Metrics(CollectorRegistry())
    sessionizer = Sessionizer(sessions, Limits(max_turns=3), idle_timeout_s=1e6, closed_retention_s=1e6,
                              allowed_lateness_s=2.0)
    totals = PartitionTotals(counts, metrics.partition_families)
    sequence = getattr(totals, "sequence", None)  # the releases that numbered batches stamped each mark with one
    dedup = DedupWindow(counts, window_s=1e6, max_keys=1000, **({"sequence": sequence} if sequence else {}))
    hot = HotPath(sessionizer, dedup, totals, Exporter(metrics, dimensions=[], cap=5, rubric=RUBRIC), metrics,
                  RUBRIC, max_event_bytes=10_000, max_request_bytes=1 << 20, sample_rate=0.0)
    hot.assign(OWNED, now=T0 + 40)
    return hot, metrics


def durable(hot: HotPath) -> None:
    """Every write so far is on the broker, as the worker's checkpoint finds before it exports the totals
    (runtime/checkpoint.py); a release before the checkpoint exported them at once from an in-memory store."""
    written = getattr(hot.totals, "written", None)
    if written is not None:
        written()()


def exported(hot: HotPath) -> list[list[Any]]:
    return sorted([p, attr, list(labels), value] for p, series in hot.totals.exported().items()
                  for (attr, labels), value in series.items())


def main(out: Path, commit: str) -> None:
    sessions, counts = MemStore(), MemStore()
    hot, _ = worker(sessions, counts)
    batch = [Input(b"open-a", turn("open-a", i), 0, timestamp=T0 + i) for i in range(2)]
    batch += [Input(b"open-cut", turn("open-cut", i), 1, timestamp=T0 + i) for i in range(5)]
    batch += [Input(b"done-b", turn("done-b", i), 1, timestamp=T0 + i) for i in range(2)]
    batch += [Input(b"done-b", end("done-b"), 1, timestamp=T0 + 30)]
    batch += [Input(b"done-c", turn("done-c", 0), 0, timestamp=T0), Input(b"done-c", end("done-c"), 0,
                                                                          timestamp=T0 + 30)]
    closed = hot.ingest(batch, now=T0 + 40).closed
    partitions = {c.conversation_id: p for c, p in closed}
    assert sorted(partitions) == ["done-b", "done-c"], partitions
    hot.count([record("done-b"), record("done-c")], partitions, now=T0 + 41)
    hot.count([record("done-c", "llm")], partitions, now=T0 + 42)
    durable(hot)
    out.write_bytes(orjson.dumps({"commit": commit, "sessions": sessions.data, "scored": counts.data,
                                  "open": sorted(hot.sessions.open), "exported": exported(hot)},
                                 option=orjson.OPT_SORT_KEYS))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
