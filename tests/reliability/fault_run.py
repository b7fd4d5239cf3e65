"""One fault run: workers under a supervisor, the HTTP judge (monitor/tools/openai_server.py) on a hash slice
of the conversations, a real Prometheus scraping the workers, known conversations in, every outcome read back
from the output topics, and a table of what happened to each id, per scorer, and of every per-partition total
the workers export against the truth.

The run only uses black-box contracts (docs/input.md, the scores and dead-letters topics,
/metrics through Prometheus), so it measures today's runtime and a rewritten one alike. The table
is written as JSON to ``var/faults/<name>.json`` and printed.
"""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
from aiokafka import ConsumerRecord
from prometheus_client import CollectorRegistry

from monitor.contracts.errors import InvalidEvent
from monitor.contracts.events import decode_event
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import decode_score
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.runtime.broker import ensure_topics
from monitor.runtime.scrape import Sample, scrape, total
from monitor.stages.export import Exporter
from monitor.stages.sampler import route_draw
from monitor.tools.openai_server import OpenAIServer
from monitor.tools.otel_traffic import Chat, GenAiApp, conversation_texts
from monitor.tools.simulator.generate import ConversationGenerator, SimConversation
from tests.support.accounting import SCORED, Expect, Ledger
from tests.support.model_fixtures import publish_distilled_model
from tests.support.prometheus_server import PrometheusServer
from tests.support.readback import compare, read_to_end
from tests.support.topic_io import Record, TopicTail, produce
from tests.support.workers import Supervisor, WorkerProcess

# What Prometheus counts as "conversations scored": the per-partition running totals through
# their recording rule, which keeps one owner's value per partition, so a partition's series survives kills
# and rebalances. A run's app is new, so every such series starts at 0: its first scraped value plus its
# increase() over the run is what it counted (increase() alone cannot see the value a series is born with).
SCORED_SERIES = 'partition:convmon_partition_conversations_scored_total:max{scorer="distilled"}'
# A re-scored conversation (reopening, stages/reopen.py) is counted by its latest revision: the earlier one's count
# goes to the retraction twin, which the recording rules subtract. Conversations scored = scored - retracted.
RETRACTED_SERIES = 'partition:convmon_partition_conversations_scored_retracted_total:max{scorer="distilled"}'
DEAD_LETTER_SERIES = "convmon_dead_letters_total"
ARTIFACTS = REPO_ROOT / "var" / "faults"
STALL_S = 90.0  # no new outcome for this long, with everything produced: the run is over
MAX_RUN_S = 600.0  # a bound on one fault run however it behaves (the whole suite takes ~11 min)
JUDGE_RATE = 0.25  # the judge's hash slice (no boosts by default: pi = the rate, the slice is known per id)
SETTLE_S = 30.0  # exported totals must equal the truth this long after the last input was produced
P_DIGITS_ERROR = 0.0005  # the scores topic rounds probabilities to 3 decimals
FLIPPABLE = "flippable:"  # truth_of's count, per item, of judged pairs whose distilled side rounding may flip
Key = tuple[str, tuple[tuple[str, str], ...]]  # sample name, labels without partition


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
    """Whether the input contract takes ``turn_count`` on an end event."""
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


def otlp_traces(prefix: str, n: int, *, per_message: int = 50) -> tuple[list[str], list[Record]]:
    """``n`` two-call chats traced by a real OpenTelemetry SDK and encoded as the Collector's kafka exporter
    publishes them: unkeyed ``otlp_proto`` messages of ``per_message`` conversations' first calls, each followed
    by one of their second calls (repeating the history). The conversations end by idle expiry."""
    app = GenAiApp()
    chats = [Chat(f"{prefix}-{i:05d}", conversation_texts(2, f"{prefix}{i}")) for i in range(n)]
    records: list[Record] = []
    for start in range(0, n, per_message):
        group = chats[start:start + per_message]
        for call in (0, 1):
            app.trace(group, calls=[call])
            records.append((None, app.take_traces("otlp_proto")))
    app.shutdown()
    return [c.conversation_id for c in chats], records


def interleave(*streams: Sequence[Record], at: int) -> list[Record]:
    """``streams[0]`` with the other streams inserted after its ``at``-th record."""
    first = list(streams[0])
    return first[:at] + [r for s in streams[1:] for r in s] + first[at:]


# --- the judge and the exported totals ---------------------------------------------------------------

def judge_settings(url: str) -> dict[str, Any]:
    """The worker's judge settings for the stand-in server. It has no provider limits: the client's default
    ones (200,000 tokens a minute) pace the judge to about 2 requests a second, minutes for a fault's slice."""
    return {"openai_base_url": url, "openai_api_key": "sk-test", "judge_concurrency": 8, "judge_timeout_s": 10.0,
            "judge_requests_per_minute": 1e6, "judge_tokens_per_minute": 1e9}


def totals_names(settings: Settings) -> set[str]:
    return {f.name + "_total" for f in Metrics(CollectorRegistry(), dimensions=tuple(
        settings.metric_dimensions)).partition_families.values()}


def exported(samples_per_worker: Iterable[list[Sample]], names: set[str]) -> dict[Key, float]:
    """Each partition's series at its largest value over the workers (Prometheus' ``max without (instance)``),
    then summed over partitions."""
    per_partition: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for samples in samples_per_worker:
        for name, labels, value in samples:
            if name in names:
                key = (name, tuple(sorted(labels.items())))
                per_partition[key] = max(per_partition.get(key, 0.0), value)
    out: dict[Key, float] = defaultdict(float)
    for (name, labels), value in per_partition.items():
        out[(name, tuple((k, v) for k, v in labels if k != "partition"))] += value
    return dict(out)


def truth_of(records: Iterable[ConsumerRecord], settings: Settings) -> tuple[dict[Key, float], Counter[str]]:
    """The partition totals of the first copy of every (scorer, conversation) among score ``records``."""
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    seen: set[tuple[str, str]] = set()
    scores = []
    for record in records:
        score = decode_score(record.value, rubric)
        if (score.scorer, score.conversation_id) not in seen:
            seen.add((score.scorer, score.conversation_id))
            scores.append(score)
    metrics = Metrics(CollectorRegistry(), dimensions=tuple(settings.metric_dimensions))
    exporter = Exporter(metrics, dimensions=list(settings.metric_dimensions), cap=settings.dimension_cap,
                        rubric=rubric, allowed_values=settings.dimension_values,
                        series_budget=settings.metric_series_budget)
    families = metrics.partition_families
    # what the judge records carried (header convmon-distilled): the distilled probabilities of the same conversation
    shadows = {s.conversation_id: {i.item_id: i.probability for i in s.items if i.probability is not None}
               for s in scores if s.scorer == "distilled"}
    out: dict[Key, float] = defaultdict(float)
    for (attribute, values), amount in exporter.observe_batch(scores, shadows).items():
        family = families.get(attribute)
        if family is not None:
            out[(family.name + "_total", tuple(sorted(zip(family.labels, values, strict=True))))] += amount
    counts = Counter(s.scorer for s in scores)
    # the worker pairs each verdict with the distilled probability it sent to the judge, unrounded; here the topic's
    # rounded one: a probability within the rounding of 0.5 may sit on the other side of the threshold
    counts.update(FLIPPABLE + item for s in scores if s.scorer == "llm"
                  for item, p in shadows.get(s.conversation_id, {}).items() if abs(p - 0.5) <= P_DIGITS_ERROR)
    return dict(out), counts


def truth(broker: str, settings: Settings) -> tuple[dict[Key, float], Counter[str]]:
    """The partition totals of the first copy of every (scorer, conversation) on the scores topic."""
    return truth_of(read_to_end(broker, settings.topic("scores")).records, settings)


def mismatches(got: dict[Key, float], want: dict[Key, float], scored: Counter[str]) -> list[str]:
    """Every series whose exported total is not the truth (probability sums within the topic's rounding; agreement
    pairs within the pairs whose distilled probability the topic rounded to 0.5 +- its rounding: ``truth_of``)."""
    wrong = []
    for key in sorted(set(got) | set(want)):
        name, labels = key
        tolerance = P_DIGITS_ERROR * scored[dict(labels).get("scorer", "")] if "probability" in name else 1e-6
        if name == "convmon_partition_agreement_pairs_total":
            tolerance = scored[FLIPPABLE + dict(labels).get("rubric", "")]
        if "_residual_" in name:  # terms weighted by w or q of probabilities the topic rounded; (y - f)^2 moves twice
            weight = "convmon_partition_rubric_residual_" + ("design_weight" if "_design_" in name else "weight")
            tolerance = 2 * P_DIGITS_ERROR * want.get((weight + "_total", labels), 0.0)
        if abs(got.get(key, 0.0) - want.get(key, 0.0)) > tolerance + 1e-6:
            wrong.append(f"{name}{dict(labels)}: exported {got.get(key)} truth {want.get(key)}")
    return wrong


def scored_by_scorer(totals: dict[Key, float]) -> dict[str, float]:
    out: Counter[str] = Counter()
    for (name, labels), value in totals.items():
        if name == "convmon_partition_conversations_scored_total":
            out[dict(labels)["scorer"]] += value
    return dict(out)


def judge_slice(expect: dict[str, Expect], rate: float, salt: str = "") -> dict[str, Expect]:
    """What the judge must score: the ids of the hash slice (the router's draw below the rate) that should be
    scored (or, policy ids, either scored or dead-lettered)."""
    return {cid: e for cid, e in expect.items() if (e == SCORED or e.either) and route_draw(cid, salt) < rate}


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
                 idle_timeout_s: float = 10.0, max_event_bytes: int = 1_000_000, scrape_s: float | None = None,
                 judge_rate: float = JUDGE_RATE, input_partitions: int | None = None, readback_timeout_s: float = 120.0,
                 **settings: Any) -> None:
        """``judge_rate`` > 0 starts the HTTP judge and judges that hash slice; ``input_partitions`` makes the
        input a producer's topic (``<prefix>otlp_spans``, CONVMON_INPUT_TOPIC) of that many partitions;
        ``readback_timeout_s`` bounds the full re-read of each output topic at the end."""
        self.readback_timeout_s = readback_timeout_s
        self.name = name
        self.workdir = workdir
        self.broker = broker
        unique = uuid.uuid4().hex[:8]
        self.judge = OpenAIServer(keep_requests=False).start() if judge_rate > 0 else None
        if self.judge is not None:
            settings = {**judge_settings(self.judge.url), **settings}
        if input_partitions is not None:
            settings["input_topic"] = f"f{unique}.otlp_spans"
        self.settings = Settings(
            app_id=f"faults-{name}-{unique}", topic_prefix=f"f{unique}.", broker_url=f"kafka://{broker}",
            sample_rate=judge_rate, idle_timeout_s=idle_timeout_s, registry_poll_s=1.0,
            data_dir=workdir,
            model_registry=workdir / "models", label_store_url=f"sqlite:///{workdir / 'labels.db'}",
            max_event_bytes=max_event_bytes, metrics_port=0, **settings,
        )
        if input_partitions is not None:  # the producer's topic exists before convmon starts
            asyncio.run(ensure_topics(broker, [self.settings.input_topic_name], input_partitions))
        publish_distilled_model(self.settings, load_rubric_set(self.settings.rubric_set, self.settings.prompts_dir))
        # with the judge's series /metrics is several MB, more than a 1 s scrape timeout renders on a loaded machine
        scrape_s = scrape_s if scrape_s is not None else 5.0 if self.judge is not None else 1.0
        self.supervisor = Supervisor({w: WorkerProcess(self.settings, workdir / f"worker-{w}.log") for w in workers})
        self.prometheus = PrometheusServer(workdir / "prometheus",
                                           [w.target for w in self.supervisor.workers.values()], scrape_s=scrape_s)
        self.ledger = Ledger({})
        self.judged = Ledger({}, scorer="llm")  # the judge's hash slice, per id (empty with the judge off)
        self.scores = TopicTail(broker, self.settings.topic("scores"))
        self.dead = TopicTail(broker, self.settings.topic("dead-letters"))
        self.started = time.time()
        self.notes: dict[str, Any] = {"preconditions": {}}
        self.produced = 0
        self.produced_at = time.time()

    def __enter__(self) -> FaultRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.supervisor.shutdown()
        self.prometheus.stop()
        if self.judge is not None:
            self.judge.stop()

    # inputs
    def expect(self, ids: Sequence[str], outcome: Expect) -> None:
        self.ledger.expect.update(dict.fromkeys(ids, outcome))
        if self.judge is not None:
            self.judged.expect.update(judge_slice(dict.fromkeys(ids, outcome), self.settings.sample_rate,
                                                  self.settings.sample_salt))

    def produce(self, records: Sequence[Record], *, topic: str = "events", max_request_size: int = 1 << 20) -> None:
        """To ``<prefix><topic>``; ``events`` is the input topic, whatever its name."""
        name = self.settings.input_topic_name if topic == "events" else self.settings.topic(topic)
        produce(self.broker, name, records, max_request_size=max_request_size)
        self.produced += len(records)
        self.produced_at = time.time()

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
        """The ids accounted for (distilled scores, dead letters); the judge's are in ``self.judged``."""
        scores, dead = self.scores.poll(), self.dead.poll()
        self.ledger.add_scores(scores)
        self.ledger.add_dead_letters(dead)
        self.judged.add_scores(scores)
        self.judged.add_dead_letters(dead)
        return self.ledger.accounted()

    def wait_accounted(self, fraction: float, *, also: Callable[[], bool] = lambda: True,
                       poll_s: float = 1.0) -> bool:
        """Until ``fraction`` of the ids have an outcome (and ``also()``); False if the run stalls first.
        ``poll_s=0`` polls back to back, to catch a fast worker early in a backlog."""
        goal = fraction * (len(self.ledger.expect) + len(self.ledger.garbage))
        last, last_change = (-1, -1), time.monotonic()
        while time.monotonic() - last_change < STALL_S and not self.supervisor.all_down() and not self._overtime():
            now = self.poll()
            if now >= goal and also():
                return True
            if (now, self.judged.accounted()) != last:  # the judge's progress is progress too
                last, last_change = (now, self.judged.accounted()), time.monotonic()
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
                name, topic = "convmon_consumer_partition_lag_messages", self.settings.input_topic_name
                if any(n == name and labels.get("topic") == topic for n, labels, _ in samples):
                    lags.append(total(samples, name, topic=topic))
        return sum(lags) if lags else None

    def finish(self, settle_s: float = 5.0) -> FaultResult:
        """Wait for every outcome (or a stall), settle, ask Prometheus, and write the table."""
        complete = self.wait_accounted(1.0, also=self.judged.complete)  # the judge's slice too
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
        table["exported_totals"] = self._exported_totals()
        series = self.prometheus.increases(SCORED_SERIES, self.started)
        retracted = self.prometheus.increases(RETRACTED_SERIES, self.started)
        dead_series = self.prometheus.increases(DEAD_LETTER_SERIES, self.started)
        increase = sum(s.increase for s in series)
        scraped = round(increase + sum(s.first for s in series), 3)
        retracted_total = round(sum(s.increase + s.first for s in retracted), 3)
        window = int(time.time() - self.started) + 2
        resets = [self.prometheus.query(f"sum(resets({selector}[{window}s]))")
                  for selector in (SCORED_SERIES, RETRACTED_SERIES)]
        table.update({
            "fault": self.name,
            "complete": complete,
            "prometheus": {
                "selector": SCORED_SERIES,
                "increase": round(increase, 3),  # increase() alone: without the values the series were born with
                "counted": round(increase),
                "truth": table["expected_scored"],
                "series": len(series),
                "unseen_first_samples": sum(s.first for s in series),
                # what the workers exported and Prometheus scraped at all: above the truth means counted twice
                "scraped_total": scraped,
                # what later revisions retracted (0 unless a conversation was scored again), and the count net of it
                "retracted": retracted_total,
                "net": round(scraped - retracted_total, 3),
                "missing": round(table["expected_scored"] - (scraped - retracted_total), 3),
                # a per-partition total that went down (a new owner restored less than was scraped) counts twice
                "resets": sum(round(float(r[0]["value"][1])) for r in resets if r),
                "dead_letters_increase": round(sum(s.increase for s in dead_series), 3),
            },
            "worker_crashes": [vars(e) for e in self.supervisor.crashes()],
            # a loop that raised: the engine logs it at CRITICAL and the worker exits (the supervisor restarts it)
            "agent_crashes": self._log_count(" CRITICAL "),
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
              f"kills={table['worker_kills']} "
              f"duration={table['duration_s']}s table: {path}"
              f"\n  judge {json.dumps({k: v for k, v in table['judge'].items() if k != 'examples'})}"
              f"\n  exported totals {json.dumps({k: v for k, v in table['exported_totals'].items() if k != 'differ'})}"
              f"\n  read back at the end: complete={back['complete']} tails agree={back['tails_agree']} "
              f"scores tail/full {back['scores']['tail_records']}/{back['scores']['full_records']} "
              f"(partitions disagreeing {back['scores']['partitions_disagreeing']}; first records from offset 0 "
              f"in {back['scores']['first_records_s']} s); tail table "
              f"{json.dumps(back['tail_table'])}")
        return FaultResult(self.name, table, path)


    def _exported_totals(self) -> dict[str, Any]:
        """Every per-partition total the live workers export (``max without (instance)`` per partition, summed)
        against the truth from the scores topic, scraped directly at least ``SETTLE_S`` after the last input."""
        time.sleep(max(0.0, self.produced_at + SETTLE_S - time.time()))
        live = []
        for worker in self.supervisor.workers.values():
            if worker.alive():
                live.append(scrape(worker.url, timeout=30.0))
        got = exported(live, totals_names(self.settings))
        want, scored = truth_of(self.full_scores, self.settings)
        wrong = mismatches(got, want, scored)
        return {"series": len(set(got) | set(want)), "series_differing": len(wrong), "differ": wrong[:12],
                "scored_exported": scored_by_scorer(got),
                "scored_truth": {k: n for k, n in scored.items() if not k.startswith(FLIPPABLE)},
                "workers_scraped": len(live), "after_last_input_s": round(time.time() - self.produced_at, 1)}

    def _log_count(self, text: str) -> int:
        return sum(w.log_path.read_text(errors="replace").count(text) for w in self.supervisor.workers.values()
                   if w.log_path.exists())

    def _read_back_again(self) -> dict[str, Any]:
        """The per-id table from both output topics read whole once more at the end, to the high watermark the
        broker's fetches report (tests/support/readback.py): what the broker holds, independent of how the tails went.
        Where a tail disagrees with it, per partition, is in ``readback`` (a tail behind is a read-back
        problem, not a lost record)."""
        scores = read_to_end(self.broker, self.settings.topic("scores"), timeout_s=self.readback_timeout_s)
        dead = read_to_end(self.broker, self.settings.topic("dead-letters"), timeout_s=self.readback_timeout_s)
        self.full_scores = scores.records
        again = Ledger(dict(self.ledger.expect), garbage=set(self.ledger.garbage))
        again.add_scores(scores.records)
        again.add_dead_letters(dead.records)
        table = again.table()
        # the judge, per id: every id of its hash slice scored once by "llm" (by its score id), none outside it
        judged = Ledger(dict(self.judged.expect), scorer="llm")
        judged.add_scores(scores.records)
        judged.add_dead_letters(dead.records)
        j = judged.table()
        table["judge"] = {"rate": self.settings.sample_rate, "slice": j["produced"], "scored_once": j["scored_once"],
                          "lost": j["lost"], "double_counted": j["double_counted"],
                          "wrong_outcome": j["wrong_outcome"], "scored_once_by_score_id": j["scored_once_by_score_id"],
                          "expected_scored": j["expected_scored"], "copies_disagree": j["copies_disagree"],
                          "outside_slice": j["foreign_scores"], "records": sum(judged.scores.values()),
                          "calls": self.judge.chat_calls if self.judge is not None else 0,
                          "examples": j["examples"]}
        # what the judge was paid: calls per conversation judged (a handover that re-judges raises it)
        table["judge"]["calls_per_judged"] = round(table["judge"]["calls"] / max(1, j["scored_once_by_score_id"]), 3)
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


def assert_exact(t: dict[str, Any], n: int) -> None:
    """A delivery fault's table, exact: every id scored once by score id (and by the judge on its slice), nothing
    lost or wrong, the exported totals and Prometheus equal to the truth, no counter reset."""
    assert (t["lost"], t["wrong_outcome"], t["score_id_wrong"], t["copies_disagree"]) == (0, 0, 0, 0), t["examples"]
    assert t["scored_once_by_score_id"] == t["expected_scored"] == n
    judge = t["judge"]
    assert judge["lost"] == 0 and judge["scored_once_by_score_id"] == judge["expected_scored"] == judge["slice"], judge
    assert t["exported_totals"]["series_differing"] == 0, t["exported_totals"]
    assert abs(t["prometheus"]["net"] - t["prometheus"]["truth"]) < 0.01 and t["prometheus"]["retracted"] == 0, \
        t["prometheus"]
    assert t["prometheus"]["resets"] == 0, t["prometheus"]
