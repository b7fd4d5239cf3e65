"""The delivery fault suite: each fault runs once on >= 2,000 conversations with known ids
and known expected outcomes, the HTTP judge on (``JUDGE_RATE`` of them, a hash slice known per id); per id,
every conversation must be scored exactly once by each scorer (on ``scores``) or dead-lettered once with its
reason, nothing lost, nothing counted twice; the per-partition scored totals as a real Prometheus scraped them
(their recording rule: first value plus ``increase()`` per series) must equal the truth, and so must every
per-partition total the workers export (``max without (instance)`` per partition, summed) at the end.

Each fault is one module-scoped run (a fixture) checked by six tests: every id accounted for, no id
twice (either scorer), once by score id, every id of the judge's slice judged, the Prometheus count and the
exported totals; each also requires that the fault happened as planned and that no
worker exited and no agent crashed by itself. Tests that fail on today's runtime only
because of a known open problem are ``xfail(strict=True)`` with the problem in the reason: when its fix
lands they pass, and strict xfail flags the mark for removal.
Tables: var/faults/<fault>.json; docs/reliability.md has the measured one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from monitor.runtime.scrape import total
from tests.reliability.fault_run import (
    FaultResult,
    FaultRun,
    interleave,
    otlp_traces,
    simulated,
    turn_events,
    whole,
)
from tests.support.accounting import SCORED, Expect
from tests.support.s3_server import S3Server
from tests.support.topic_io import Record, list_topics

N = 2000
pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.timeout(1200)]


# --- 1. worker kill -9, twice -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def kill_9_twice(broker: str, tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    return kill_9_twice_run("kill_9_twice", broker, tmp_path_factory.mktemp("kill"))


def kill_9_twice_run(name: str, broker: str, workdir: Path, **settings: Any) -> FaultResult:
    """Whole conversations in 40 parts a second apart; the worker is SIGKILLed right after parts 10 and 24
    (while it works on them, with more to come), each time once it has scored from the stream, and
    restarted at once on the same port (its old membership times out meanwhile)."""
    convs = simulated(N, "kill", seed=21)
    with FaultRun(name, workdir, broker, **settings) as run:
        run.expect([c.conversation_id for c in convs], SCORED)
        run.supervisor.start("a")
        seen: list[int] = [0]

        def scoring() -> None:  # the (restarted) worker scores: the next kill falls mid-stream
            run.precondition(f"worker scoring before kill {len(seen)}", run.wait_progress(seen[-1]))

        def kill() -> None:
            seen.append(run.ledger.accounted())
            run.supervisor.kill("a")

        run.produce_in_chunks([whole(c) for c in convs], chunks=40, pace_s=1.0,
                              at={9: scoring, 10: kill, 23: scoring, 24: kill})
        run.notes["kills_at_accounted"] = seen[1:]
        result = run.finish()
    return result


OUTAGE_S = 5.0


@pytest.fixture(scope="module")
def broker_restart(tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    """The broker keeps its topics in S3 (moto). Three quarters of the conversations are produced as turn
    events (so open sessions live in the sessions changelog) and acknowledged; as soon as the worker has
    scored some of them (a backlog of hundreds left) the broker is SIGKILLed, stays down ``OUTAGE_S`` and
    restarts on the same port and storage; then the last quarter is produced."""
    workdir = tmp_path_factory.mktemp("broker")
    convs = simulated(N, "brk", seed=22)
    first = 3 * N // 4
    with S3Server(workdir / "s3.log") as s3:
        broker = s3.broker(log_path=workdir / "broker.log").start()
        try:
            # the judge's one-record commits leave many small batches, and Tansu's S3 engine fetches them slowly
            # (a full re-read of 2,573 records took over 120 s on the loaded 2-core machine)
            with FaultRun("broker_restart", workdir, broker.bootstrap, readback_timeout_s=400.0) as run:
                run.expect([c.conversation_id for c in convs], SCORED)
                run.supervisor.start("a")
                run.produce([r for c in convs[:first] for r in turn_events(c)])
                run.wait_accounted(0.01, poll_s=0.0)
                run.notes["broker_kill_at_accounted"] = run.ledger.accounted()
                run.precondition("broker killed with a backlog of 100+", run.ledger.accounted() <= first - 100)
                broker.kill()
                time.sleep(OUTAGE_S)  # the fault's length: a restart is not instantaneous
                broker.start()
                run.produce([r for c in convs[first:] for r in turn_events(c)])
                result = run.finish()
                result.table["scores_batches_in_s3"] = s3.batches_per_partition(run.settings.topic("scores"))
                result.path.write_text(json.dumps(result.table, indent=2, default=str))
        finally:
            broker.stop()
    return result


# --- 3. unkeyed input -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def unkeyed(broker: str, tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    """Turn and end events produced without a key: the producer spreads one conversation's events over
    every partition. Each conversation must come out whole, as if keyed (nothing dead-lettered)."""
    convs = simulated(N, "unkeyed", seed=23)
    with FaultRun("unkeyed", tmp_path_factory.mktemp("unkeyed"), broker) as run:
        run.expect([c.conversation_id for c in convs], SCORED)
        run.supervisor.start("a")
        run.produce([r for c in convs for r in turn_events(c, keyed=False)])
        result = run.finish()
    return result


# --- 4. the metadata bomb ---------------------------------------------------------------------------

BOMB_BYTES = 630_000


def metadata_bomb(cid: str) -> list[Record]:
    """Three turns whose metadata grows by 630 KB each (every event under max_event_bytes), then an end."""
    out: list[Record] = []
    for i in range(3):
        event = {"type": "turn", "conversation_id": cid, "turn_index": i, "role": "user" if i % 2 == 0 else "assistant",
                 "text": f"turn {i}", "timestamp": 1795000000.0 + i, "metadata": {f"blob{i}": "m" * BOMB_BYTES}}
        out.append((cid.encode(), orjson.dumps(event)))
    out.append((cid.encode(), orjson.dumps({"type": "end", "conversation_id": cid, "timestamp": 1795000010.0})))
    return out


@pytest.fixture(scope="module")
def bomb(broker: str, tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    """2,000 conversations as turn events with two metadata bombs among them (after 1/3 and 2/3).
    The bomb's outcome is policy (truncated and scored, or dead-lettered): either, once."""
    convs = simulated(N, "bomb", seed=24)
    normal = [r for c in convs for r in turn_events(c)]
    bombs = ["bomb-x-0", "bomb-x-1"]
    events = interleave(normal, metadata_bomb(bombs[1]), at=2 * len(normal) // 3)
    events = interleave(events, metadata_bomb(bombs[0]), at=len(normal) // 3)
    with FaultRun("metadata_bomb", tmp_path_factory.mktemp("bomb"), broker) as run:
        run.expect([c.conversation_id for c in convs], SCORED)
        run.expect(bombs, Expect(either=True))
        run.supervisor.start("a")
        run.produce(events)
        result = run.finish()
    return result


# --- 5. 5 MB events ---------------------------------------------------------------------------------

def huge(cid: str) -> Record:
    event = {"type": "conversation", "conversation_id": cid,
             "turns": [{"index": 0, "role": "user", "text": "h" * 5_000_000}]}
    return cid.encode(), orjson.dumps(event)


@pytest.fixture(scope="module")
def five_mb(broker: str, tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    """Three 5 MB conversation events among 2,000 whole conversations: each must be dead-lettered
    ``too_large`` (with a bounded prefix), the rest scored."""
    convs = simulated(N, "big", seed=25)
    normal = [whole(c) for c in convs]
    huge_ids = [f"big-huge-{i}" for i in range(3)]
    events = normal
    for i, cid in enumerate(huge_ids):
        events = interleave(events, [huge(cid)], at=(i + 1) * len(normal) // 4)
    with FaultRun("five_mb_events", tmp_path_factory.mktemp("big"), broker) as run:
        run.expect([c.conversation_id for c in convs], SCORED)
        run.expect(huge_ids, Expect(reason="too_large"))
        run.supervisor.start("a")
        run.produce(events, max_request_size=8 << 20)
        result = run.finish()
    return result


# --- 6. garbage on internal topics ------------------------------------------------------------------

def garbage(start: int) -> list[Record]:
    """Not JSON, a JSON array, a JSON object of the wrong shape, and an empty value: each marked."""
    marks = [f"garbage-{start + i}" for i in range(4)]
    return [
        (marks[0].encode(), marks[0].encode() + b" \x00\xff{not json"),
        (marks[1].encode(), orjson.dumps([marks[1], 1, None])),
        (marks[2].encode(), orjson.dumps({"op": marks[2], "conversation_id": 7, "scorer": []})),
        (marks[3].encode(), b""),
    ]


@pytest.fixture(scope="module")
def internal_garbage(broker: str, tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    """Garbage on every internal topic (the worker's topics other than events, scores and dead-letters)
    while 2,000 whole conversations flow; every garbage record must be dead-lettered, once."""
    convs = simulated(N, "junk", seed=26)
    with FaultRun("internal_garbage", tmp_path_factory.mktemp("junk"), broker) as run:
        run.expect([c.conversation_id for c in convs], SCORED)
        run.supervisor.start("a")
        public = {run.settings.topic(t) for t in ("events", "scores", "dead-letters")}
        internal = sorted(t for t in list_topics(broker) if t.startswith(run.settings.topic_prefix) and t not in public)
        run.notes["internal_topics"] = internal
        run.precondition("internal topics found", bool(internal))
        records = [whole(c) for c in convs]
        run.produce(records[: N // 2])
        for i, topic in enumerate(internal):
            junk = garbage(10 * i)
            run.ledger.garbage.update(k.decode() for k, _ in junk if k)
            run.produce(junk, topic=topic.removeprefix(run.settings.topic_prefix))
        run.produce(records[N // 2:])
        result = run.finish()
    return result


# --- 7. scale out and in under load -----------------------------------------------------------------

@pytest.fixture(scope="module")
def scale_out_in(broker: str, tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    return scale_out_in_run("scale_out_in", broker, tmp_path_factory.mktemp("scale"))


def scale_out_in_run(name: str, broker: str, workdir: Path, **settings: Any) -> FaultResult:
    """Whole conversations in 40 parts a second apart; a second worker joins after part 8 and leaves
    (SIGTERM) after part 24, once it has scored something, while parts remain to be produced."""
    convs = simulated(N, "scale", seed=27)
    with FaultRun(name, workdir, broker, workers=("a", "b"), **settings) as run:
        run.expect([c.conversation_id for c in convs], SCORED)
        run.supervisor.start("a")

        def join() -> None:
            run.notes["joined_at_accounted"] = run.ledger.accounted()
            run.supervisor.start("b")

        def b_scored() -> bool:
            try:
                return total(run.supervisor.workers["b"].samples(), "convmon_conversations_scored_total") > 0
            except httpx.HTTPError:  # not serving (yet, or any more)
                return False

        def leave() -> None:
            run.precondition("second worker scored before leaving", run.wait_progress(0, also=b_scored))
            run.notes["left_at_accounted"] = run.ledger.accounted()
            run.supervisor.stop("b")

        run.produce_in_chunks([whole(c) for c in convs], chunks=40, pace_s=1.0, at={8: join, 24: leave})
        result = run.finish()
    return result


# --- 8. two workers, one killed and restarted ------------------------------------------------------

@pytest.fixture(scope="module")
def two_workers_one_killed(broker: str, tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    return two_workers_one_killed_run("two_workers_one_killed", broker, tmp_path_factory.mktemp("two"))


def two_workers_one_killed_run(name: str, broker: str, workdir: Path, **settings: Any) -> FaultResult:
    """Two workers in one group from the start; whole conversations in 40 parts a second apart; worker ``b`` is
    SIGKILLed right after part 16, once both have scored, and restarted at once (its partitions move to ``a``
    when its membership times out, and back when it rejoins)."""
    convs = simulated(N, "two", seed=28)
    with FaultRun(name, workdir, broker, workers=("a", "b"), **settings) as run:
        run.expect([c.conversation_id for c in convs], SCORED)
        run.supervisor.start("a")
        run.supervisor.start("b")

        def scored(name: str) -> bool:
            try:
                return total(run.supervisor.workers[name].samples(), "convmon_conversations_scored_total") > 0
            except httpx.HTTPError:
                return False

        def kill() -> None:
            both = run.wait_progress(0, also=lambda: scored("a") and scored("b"))
            run.precondition("both workers scored before the kill", both)
            run.notes["killed_at_accounted"] = run.ledger.accounted()
            run.supervisor.kill("b")

        run.produce_in_chunks([whole(c) for c in convs], chunks=40, pace_s=1.0, at={16: kill})
        result = run.finish()
    return result


# --- 9. OTLP traces on a producer's topic of 1 or 3 partitions (convmon's have 4) ----------------------

def otlp_fault(name: str, partitions: int, broker: str, workdir: Path, **settings: Any) -> FaultResult:
    """2,000 two-call chats as unkeyed OTLP trace messages (50 conversations each) on a producer's topic
    (CONVMON_INPUT_TOPIC) of ``partitions`` partitions against convmon's 4: the events are re-keyed through
    convmon's own topic; every conversation ends by idle expiry."""
    ids, records = otlp_traces(f"otlp{partitions}", N)
    with FaultRun(name, workdir, broker, input_format="otlp_traces", topic_partitions=4,
                  input_partitions=partitions, **settings) as run:
        run.expect(ids, SCORED)
        run.supervisor.start("a")
        run.produce_in_chunks(records, chunks=20, pace_s=1.0, at={})
        result = run.finish()
    return result


@pytest.fixture(scope="module")
def otlp_1_partition(broker: str, tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    return otlp_fault("otlp_1_partition", 1, broker, tmp_path_factory.mktemp("otlp1"))


@pytest.fixture(scope="module")
def otlp_3_partitions(broker: str, tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    return otlp_fault("otlp_3_partitions", 3, broker, tmp_path_factory.mktemp("otlp3"))


# --- the checks, per fault --------------------------------------------------------------------------

FAULTS = ("kill_9_twice", "broker_restart", "unkeyed", "bomb", "five_mb", "internal_garbage", "scale_out_in",
          "two_workers_one_killed", "otlp_1_partition", "otlp_3_partitions")
# Fixed by the hot-path runtime: unkeyed input, the metadata bomb, 5 MB events and internal
# garbage now pass every per-id check. What is still open is marked, each with its reason.
LOST: dict[str, str] = {}
# The broker-restart run once read back only 305 of 2,000 score records (CI rehearsal at 61060eb) while
# Prometheus counted 2,000: a read-back that stopped early, not lost sends. The tail took "no records within
# 300 ms" for the end, and on Tansu's S3 engine a fresh consumer's first fetch takes 0.5-0.7 s once a partition
# holds some 50 small batches; every acknowledged record was on the broker at its acknowledged offset
# Reads now end at the fetched high watermark and the table is made from a full re-read
# at the end, so every per-id check is strict again.
TWICE: dict[str, str] = {}
# Not strict: `scores` is at least once. A batch whose outputs were produced but whose offsets did not commit (a
# kill -9 or broker restart between the two, a handover of a partition with a batch in flight) is processed
# again by the partition's next owner and its score records produced again: counted once (the writer's dedup
# marks are in the same checkpoint as the offsets), with the same convmon-score-id for consumers to dedupe.
# Exactly once on `scores` needs Kafka transactions, which the embedded Tansu broker does not support usably
# (tansu_txn_probe.py). Whether a run doubles depends on where the fault falls.
AT_LEAST_ONCE = ("at least once on `scores` (counted once; the same convmon-score-id): a batch produced but not "
                 "committed when the fault fell is produced again by the partition's next owner")
FLAKY_TWICE = dict.fromkeys(("kill_9_twice", "broker_restart", "scale_out_in", "two_workers_one_killed"),
                            AT_LEAST_ONCE)
# Per-partition totals through their recording rule: every fault now checked for real.
PROMETHEUS: dict[str, str] = {}


def _params(xfails: dict[str, str], flaky: dict[str, str] | None = None) -> list[object]:
    def marks(fault: str) -> list[pytest.MarkDecorator]:
        if fault in xfails:
            return [pytest.mark.xfail(strict=True, reason=xfails[fault])]
        if flaky and fault in flaky:
            return [pytest.mark.xfail(strict=False, reason=flaky[fault])]
        return []

    return [pytest.param(f, id=f, marks=marks(f)) for f in FAULTS]


def _result(request: pytest.FixtureRequest, fault: str) -> FaultResult:
    """The fault's run, if it happened as planned, its output topics were read back to the end the broker's
    fetches report (the table is made from that read), and no input made a worker exit or an agent crash
    (nothing a crashed runtime counts can be trusted; kills injected by the fault are not crashes)."""
    result: FaultResult = request.getfixturevalue(fault)
    assert all(result["preconditions"].values()), f"the fault did not happen as planned: {result['preconditions']}"
    back = result["readback"]
    assert back["complete"], f"the output topics were not read to their end: {back}"
    assert result["worker_crashes"] == [] and result["agent_crashes"] == 0, (
        f"{len(result['worker_crashes'])} worker exits, {result['agent_crashes']} agent crashes")
    return result


@pytest.mark.parametrize("fault", _params(LOST))
def test_every_id_accounted_for(request: pytest.FixtureRequest, fault: str) -> None:
    """Per id: scored, or dead-lettered with the expected reason; nothing lost, no wrong outcome (dead-lettered
    when it should be scored, or both); every garbage record dead-lettered."""
    t = _result(request, fault).table
    assert (t["lost"], t["wrong_outcome"]) == (0, 0), {k: t["examples"][k] for k in ("lost", "wrong")}
    assert t["garbage_dead_lettered"] == t["garbage_produced"]
    assert t["unparsable_scores"] == 0 and t["foreign_scores"] == 0


@pytest.mark.parametrize("fault", _params(TWICE, FLAKY_TWICE))
def test_no_id_scored_or_dead_lettered_twice(request: pytest.FixtureRequest, fault: str) -> None:
    """Per id: at most one score record on `scores`, at most one dead letter."""
    t = _result(request, fault).table
    assert t["double_counted"] == 0, t["examples"]["double"]
    assert t["scored_once"] + t["dead_lettered"] + t["lost"] + t["wrong_outcome"] == t["produced"]
    assert t["judge"]["double_counted"] == 0, t["judge"]["examples"]["double"]


@pytest.mark.parametrize("fault", _params({}))
def test_deduplicated_by_score_id_every_id_is_scored_once(request: pytest.FixtureRequest, fault: str) -> None:
    """The contract of the at-least-once `scores` topic: every record carries its stable id (header
    ``convmon-score-id`` = ``<scorer>:<conversation_id>``) and every copy of one id is the same score, so a
    consumer keeping the first record per id has each conversation that should be scored exactly once."""
    t = _result(request, fault).table
    assert t["score_id_wrong"] == 0 and t["copies_disagree"] == 0, t["examples"]["double"]
    assert t["scored_once_by_score_id"] == t["expected_scored"] and t["lost"] == 0


@pytest.mark.parametrize("fault", _params({}))
def test_every_id_of_the_judge_slice_is_judged_once_by_score_id(request: pytest.FixtureRequest, fault: str) -> None:
    """The judge (the HTTP server, ``JUDGE_RATE``): every id whose router draw is below the rate and which should
    be scored has an ``llm`` score on `scores` (deduplicated by its score id: every copy the same score), and no
    id outside that slice has one."""
    t = _result(request, fault).table
    judge = t["judge"]
    assert judge["rate"] >= 0.2 and judge["slice"] >= 0.2 * t["produced"] * 0.8, judge
    assert (judge["lost"], judge["wrong_outcome"], judge["outside_slice"]) == (0, 0, 0), judge["examples"]
    assert judge["scored_once_by_score_id"] == judge["expected_scored"] == judge["slice"], judge
    assert judge["copies_disagree"] == 0, judge["examples"]["double"]


@pytest.mark.parametrize("fault", _params(PROMETHEUS))
def test_prometheus_increase_equals_the_conversations_scored(request: pytest.FixtureRequest, fault: str) -> None:
    """What Prometheus holds of the per-partition totals (their recording rule, one owner's value per partition)
    equals the number of conversations that should be scored: per series its first scraped value plus its
    increase() over the run (no extrapolation; the run's app is new, so every series started at 0), net of the
    retraction series (reopening), and no series went down (a new owner restoring less than was scraped would make
    increase() count it twice). No conversation here continues after its end, so nothing may be retracted: a
    revision 2 would be one closed before its last turns came."""
    prom = _result(request, fault).table["prometheus"]
    assert prom["resets"] == 0, prom
    assert abs(prom["net"] - prom["truth"]) < 0.01 and prom["retracted"] == 0, prom


@pytest.mark.parametrize("fault", _params({}))
def test_every_exported_partition_total_equals_the_truth(request: pytest.FixtureRequest, fault: str) -> None:
    """Every per-partition total the live workers export (conversations scored, verdicts, probability sums; per
    scorer), each partition at its largest value over the workers and summed, scraped at least 30 s after the
    last input, equals the same totals computed from the first copy of every (scorer, id) on `scores`; and the
    scored ones are the per-id truth: distilled the ids to be scored, llm the judge's slice."""
    t = _result(request, fault).table
    totals = t["exported_totals"]
    assert totals["series_differing"] == 0, totals
    assert totals["scored_exported"] == totals["scored_truth"] == {
        "distilled": t["expected_scored"], "llm": t["judge"]["expected_scored"]}, totals

