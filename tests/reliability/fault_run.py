"""One fault run: workers under a supervisor, a real Prometheus scraping them, known conversations in,
every outcome read back from the output topics, and a table of what happened to each id.

The run only uses black-box contracts (docs/input.md, the scores and dead-letters topics,
/metrics through Prometheus), so it measures today's runtime and a rewritten one alike. The table
is written as JSON to ``var/faults/<name>.json`` and printed.
"""

from __future__ import annotations

import functools
import json
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import decode_event
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.runtime.scrape import total
from monitor.tools.simulator.generate import ConversationGenerator, SimConversation
from tests.accounting import Expect, Ledger
from tests.model_fixtures import publish_distilled_model
from tests.prometheus_server import PrometheusServer
from tests.readback import compare, read_to_end
from tests.topic_io import Record, TopicTail, produce
from tests.workers import Supervisor, WorkerProcess

# What Prometheus counts as "conversations scored": the per-partition running totals (#18 item 6) through
# their recording rule, which keeps one owner's value per partition, so a partition's series survives kills
# and rebalances. A run's app is new, so every such series starts at 0: its first scraped value plus its
# increase() over the run is what it counted (increase() alone cannot see the value a series is born with).
SCORED_SERIES = 'partition:convmon_partition_conversations_scored_total:max{scorer="distilled"}'
DEAD_LETTER_SERIES = "convmon_dead_letters_total"
ARTIFACTS = REPO_ROOT / "var" / "faults"
STALL_S = 90.0  # no new outcome for this long, with everything produced: the run is over
GAP_WARNING, REWIND_WARNING = "will be committed without a record", ": reading it again from"  # runtime/seeks.py
MAX_RUN_S = 600.0  # a bound on one fault run however it behaves (the whole suite takes ~11 min)


# --- inputs -----------------------------------------------------------------------------------------

def simulated(n: int, prefix: str, seed: int) -> list[SimConversation]:
    settings = Settings()
    generator = ConversationGenerator(load_rubric_set(settings.rubric_set, settings.prompts_dir), seed=seed)
    return [generator.generate(f"{prefix}-{i:05d}", time.time()) for i in range(n)]


def whole(conv: SimConversation) -> Record:
    """The conversation as one ``conversation`` event (id second, so a bounded prefix still names it)."""
    turns = [e for e in conv.events if e["type"] == "turn"]
    event = {"type": "conversation", "conversation_id": conv.conversation_id,
             "turns": [{"index": t["turn_index"], "role": t["role"], "text": t["text"], "timestamp": t["timestamp"]}
                       for t in turns],
             "metadata": turns[0].get("metadata", {}), "simulated_truth": conv.truth}
    return conv.conversation_id.encode(), orjson.dumps(event)


@functools.cache
def end_accepts_turn_count() -> bool:
    """Whether the input contract takes ``turn_count`` on an end event (issue #18, item 5)."""
    try:
        decode_event(orjson.dumps({"type": "end", "conversation_id": "c", "timestamp": 1.0, "turn_count": 1}))
    except InvalidEvent:
        return False
    return True


def turn_events(conv: SimConversation, *, keyed: bool = True) -> list[Record]:
    """Its turn events then its end event, in order; ``turn_count`` on the end when the contract has it."""
    events = [dict(e) for e in conv.events]
    if end_accepts_turn_count():
        events[-1]["turn_count"] = sum(1 for e in events if e["type"] == "turn")
    key = conv.conversation_id.encode() if keyed else None
    return [(key, orjson.dumps({"type": e.pop("type"), "conversation_id": e.pop("conversation_id"), **e}))
            for e in events]


def interleave(*streams: Sequence[Record], at: int) -> list[Record]:
    """``streams[0]`` with the other streams inserted after its ``at``-th record."""
    first = list(streams[0])
    return first[:at] + [r for s in streams[1:] for r in s] + first[at:]


# --- the run ----------------------------------------------------------------------------------------

@dataclass
class FaultResult:
    name: str
    table: dict[str, Any]
    path: Path

    def __getitem__(self, key: str) -> Any:
        return self.table[key]


class FaultRun:
    """Use as a context manager; ``finish()`` waits for the outcomes and returns the table."""

    def __init__(self, name: str, workdir: Path, broker: str, *, workers: Sequence[str] = ("a",),
                 idle_timeout_s: float = 10.0, max_event_bytes: int = 1_000_000, scrape_s: float = 1.0,
                 **settings: Any) -> None:
        self.name = name
        self.workdir = workdir
        self.broker = broker
        unique = uuid.uuid4().hex[:8]
        self.settings = Settings(
            app_id=f"faults-{name}-{unique}", topic_prefix=f"f{unique}.", broker_url=f"kafka://{broker}",
            sample_rate=settings.pop("sample_rate", 0.0), idle_timeout_s=idle_timeout_s, registry_poll_s=1.0,
            data_dir=workdir,
            model_registry=workdir / "models", label_store_url=f"sqlite:///{workdir / 'labels.db'}",
            max_event_bytes=max_event_bytes, metrics_port=0, **settings,
        )
        publish_distilled_model(self.settings, load_rubric_set(self.settings.rubric_set, self.settings.prompts_dir))
        self.supervisor = Supervisor({w: WorkerProcess(self.settings, workdir / f"worker-{w}.log") for w in workers})
        self.prometheus = PrometheusServer(workdir / "prometheus",
                                           [w.target for w in self.supervisor.workers.values()], scrape_s=scrape_s)
        self.ledger = Ledger({})
        self.scores = TopicTail(broker, self.settings.topic("scores"))
        self.dead = TopicTail(broker, self.settings.topic("dead-letters"))
        self.started = time.time()
        self.notes: dict[str, Any] = {"preconditions": {}}
        self.produced = 0

    def __enter__(self) -> FaultRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.supervisor.shutdown()
        self.prometheus.stop()

    # inputs
    def expect(self, ids: Sequence[str], outcome: Expect) -> None:
        self.ledger.expect.update(dict.fromkeys(ids, outcome))

    def produce(self, records: Sequence[Record], *, topic: str = "events", max_request_size: int = 1 << 20) -> None:
        produce(self.broker, self.settings.topic(topic), records, max_request_size=max_request_size)
        self.produced += len(records)

    def produce_in_chunks(self, records: Sequence[Record], *, chunks: int, pace_s: float,
                          at: dict[int, Callable[[], None]]) -> None:
        """``records`` in ``chunks`` equal parts, ``pace_s`` apart (the load), running ``at[i]`` right after
        part ``i``: a fault scheduled by the stream's position, so it always falls mid-stream."""
        size = -(-len(records) // chunks)
        for i, start in enumerate(range(0, len(records), size)):
            self.produce(records[start:start + size])
            if i in at:
                at[i]()
            time.sleep(pace_s)

    def wait_progress(self, beyond: int, *, also: Callable[[], bool] = lambda: True) -> bool:
        """Until more than ``beyond`` outcomes are in (and ``also()``); False if the run stalls first."""
        total = len(self.ledger.expect) + len(self.ledger.garbage)
        return self.wait_accounted((beyond + 1) / total, also=also)

    def precondition(self, what: str, held: bool) -> None:
        """Record whether the fault happened as planned (every check asserts these first)."""
        self.notes["preconditions"][what] = held

    # progress
    def poll(self) -> int:
        self.ledger.add_scores(self.scores.poll())
        self.ledger.add_dead_letters(self.dead.poll())
        return self.ledger.accounted()

    def wait_accounted(self, fraction: float, *, also: Callable[[], bool] = lambda: True,
                       poll_s: float = 1.0) -> bool:
        """Until ``fraction`` of the ids have an outcome (and ``also()``); False if the run stalls first.
        ``poll_s=0`` polls back to back, to catch a fast worker early in a backlog."""
        goal = fraction * (len(self.ledger.expect) + len(self.ledger.garbage))
        last, last_change = -1, time.monotonic()
        while time.monotonic() - last_change < STALL_S and not self.supervisor.all_down() and not self._overtime():
            now = self.poll()
            if now >= goal and also():
                return True
            if now != last:
                last, last_change = now, time.monotonic()
            time.sleep(poll_s)
        return False

    def _overtime(self) -> bool:
        return time.time() - self.started > MAX_RUN_S

    def _events_lag(self) -> float | None:
        """Messages of the events topic the live workers have not processed (None: no live worker reported it).
        An incomplete run with input left is a stalled worker; with none left, lost conversations."""
        lags = []
        for worker in self.supervisor.workers.values():
            if worker.alive():
                try:
                    samples = worker.samples()
                except httpx.HTTPError:
                    continue
                name, topic = "convmon_consumer_partition_lag_messages", self.settings.topic("events")
                if any(n == name and labels.get("topic") == topic for n, labels, _ in samples):
                    lags.append(total(samples, name, topic=topic))
        return sum(lags) if lags else None

    def finish(self, settle_s: float = 5.0) -> FaultResult:
        """Wait for every outcome (or a stall), settle, ask Prometheus, and write the table."""
        complete = self.wait_accounted(1.0)
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < settle_s and not self._overtime():  # duplicates would arrive now
            before = (len(self.scores.records), len(self.dead.records))
            self.poll()
            if (len(self.scores.records), len(self.dead.records)) != before:
                quiet_since = time.monotonic()
            time.sleep(1.0)
        live = [w.target for w in self.supervisor.workers.values() if w.alive()]
        if live:
            self.prometheus.wait_scraped_after(time.time(), live)
            self.prometheus.wait_stable(f"sum({SCORED_SERIES})")
        table = self._read_back_again()
        table["events_lag_at_end"] = self._events_lag()
        series = self.prometheus.increases(SCORED_SERIES, self.started)
        dead_series = self.prometheus.increases(DEAD_LETTER_SERIES, self.started)
        increase = sum(s.increase for s in series)
        window = int(time.time() - self.started) + 2
        resets = self.prometheus.query(f"sum(resets({SCORED_SERIES}[{window}s]))")
        table.update({
            "fault": self.name,
            "complete": complete,
            "prometheus": {
                "selector": SCORED_SERIES,
                "increase": round(increase, 3),
                "counted": round(increase),
                "truth": table["expected_scored"],
                "missing": table["expected_scored"] - round(increase),
                "series": len(series),
                "unseen_first_samples": sum(s.first for s in series),
                # what the workers exported and Prometheus scraped at all: above the truth means counted twice
                "scraped_total": round(increase + sum(s.first for s in series), 3),
                # a per-partition total that went down (a new owner restored less than was scraped) counts twice
                "resets": round(float(resets[0]["value"][1])) if resets else 0,
                "dead_letters_increase": round(sum(s.increase for s in dead_series), 3),
            },
            "worker_crashes": [vars(e) for e in self.supervisor.crashes()],
            # an agent that raised: faust logs it and restarts the agent, the process lives on
            "agent_crashes": self._log_count("Crashed reason"),
            # input offsets faust committed over as a gap (runtime/seeks.py): none of the fault runs' input is
            # transactional, so every one is a record never processed
            "gap_warnings": self._log_count(GAP_WARNING),
            "rewinds": self._log_count(REWIND_WARNING),  # jumps read again (runtime/seeks.py): nothing lost
            "worker_kills": sum(1 for e in self.supervisor.exits if e.injected),
            "workers_given_up": sorted(self.supervisor.given_up),
            "duration_s": round(time.time() - self.started, 1),
            "runtime": _revision(),
            **self.notes,
        })
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}.json"
        path.write_text(json.dumps(table, indent=2, default=str))
        back = table["readback"]
        summary = {k: table[k] for k in ("produced", "scored_once", "dead_lettered", "lost", "double_counted",
                                          "wrong_outcome", "garbage_produced", "garbage_dead_lettered",
                                          "scored_once_by_score_id", "copies_disagree", "score_id_wrong")}
        print(f"\n[fault {self.name}] {json.dumps(summary)}\n  prometheus {json.dumps(table['prometheus'])}"
              f"\n  crashes={len(table['worker_crashes'])} agent_crashes={table['agent_crashes']} "
              f"kills={table['worker_kills']} gaps={table['gap_warnings']} rewinds={table['rewinds']} "
              f"duration={table['duration_s']}s table: {path}"
              f"\n  read back at the end: complete={back['complete']} tails agree={back['tails_agree']} "
              f"scores tail/full {back['scores']['tail_records']}/{back['scores']['full_records']} "
              f"(partitions disagreeing {back['scores']['partitions_disagreeing']}; first records from offset 0 "
              f"in {back['scores']['first_records_s']} s); tail table "
              f"{json.dumps(back['tail_table'])}")
        return FaultResult(self.name, table, path)


    def _log_count(self, text: str) -> int:
        return sum(w.log_path.read_text(errors="replace").count(text) for w in self.supervisor.workers.values()
                   if w.log_path.exists())

    def _read_back_again(self) -> dict[str, Any]:
        """The per-id table from both output topics read whole once more at the end, to the high watermark the
        broker's fetches report (tests/readback.py): what the broker holds, independent of how the tails went.
        Where a tail disagrees with it, per partition, is in ``readback`` (a tail behind is a read-back
        problem, not a lost record: issue #18)."""
        scores = read_to_end(self.broker, self.settings.topic("scores"))
        dead = read_to_end(self.broker, self.settings.topic("dead-letters"))
        again = Ledger(dict(self.ledger.expect), garbage=set(self.ledger.garbage))
        again.add_scores(scores.records)
        again.add_dead_letters(dead.records)
        table = again.table()
        tail = self.ledger.table()
        checks = {"scores": compare(self.scores.records, scores, self.scores.positions),
                  "dead_letters": compare(self.dead.records, dead, self.dead.positions)}
        table["readback"] = {
            "complete": scores.complete and dead.complete,  # every partition read to its fetched high watermark
            "tails_agree": not any(c["partitions_disagreeing"] for c in checks.values()),
            "tail_table": {k: tail[k] for k in ("scored_once", "dead_lettered", "lost", "double_counted",
                                                "wrong_outcome")},
            **checks,
            "tail_errors": self.scores.errors + self.dead.errors,
            "tail_unfinished_polls": self.scores.unfinished + self.dead.unfinished,
            "scores_tail_history": self.scores.history[-60:],
        }
        return table


def _revision() -> str:
    out = subprocess.run(["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty"], capture_output=True,
                         text=True, check=False)
    return out.stdout.strip() or "unknown"
