"""Exact counts with the LLM judge on: the real broker, real worker processes and
the project's OpenAI-compatible HTTP server as the judge.

Every per-partition total the workers export (``convmon_partition_*_total``: conversations scored, per-item
verdicts, probability sums, per scorer; the corrected rate's residual terms of the judged conversations, whose
truth pairs each verdict with the distilled score of the same conversation) is compared with the truth once the
input is processed and at least 30 s after the last record was produced. A partition's exported value is the
largest any live worker exports (Prometheus' ``max without (instance)``), summed over partitions; the truth is
the same totals computed from the first copy of every score on the scores topic (probabilities there carry 3
decimals, hence a tolerance of half a thousandth per conversation on the probability sums). Per id: every
conversation scored once by the distilled model, every judged one once by the judge (repeats carry the same
``convmon-score-id``).

On 9858d22 the judge's one-record commits were acknowledged before the hot path's batches and those
batches' totals were never exported (926 of 1,000), and verdicts of conversations whose input partition
number differed from their judge-topic partition were dropped as ``partition_revoked``.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.runtime.broker import ensure_topics
from monitor.runtime.scrape import Sample, scrape, total
from monitor.tools.openai_server import OpenAIServer
from tests.reliability.fault_run import (
    FaultResult,
    FaultRun,
    Key,
    exported,
    judge_settings,
    mismatches,
    scored_by_scorer,
    simulated,
    totals_names,
    truth,
    whole,
)
from tests.support.accounting import SCORED, Ledger
from tests.support.model_fixtures import publish_distilled_model
from tests.support.readback import read_to_end
from tests.support.topic_io import produce
from tests.support.workers import WorkerProcess, wait_until

N = 2000
RATE = 0.25  # the judge's hash-slice rate (uncertainty and feedback raise some conversations' pi above it)
SETTLE_S = 30.0  # exported totals must equal the truth this long after the last input was produced
pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.timeout(1200)]


def per_id_llm(broker: str, settings: Settings, ids: list[str]) -> dict[str, Any]:
    """The judge's scores per id: judged ids, and any id whose copies disagree or lack the right score id."""
    ledger = Ledger(dict.fromkeys(ids, SCORED), scorer="llm")
    ledger.add_scores(read_to_end(broker, settings.topic("scores")).records)
    return {"judged": sum(1 for c in ids if ledger.scores.get(c)), "copies_disagree": sum(
        1 for c in ledger.copies.values() if len(c) > 1), "score_id_wrong": ledger.score_id_wrong,
            "repeats": sum(n - 1 for n in ledger.scores.values() if n > 1)}


def progress(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """A failure's evidence: how far the worker got, per label."""
    wanted = {"convmon_conversations_scored_total": "scorer", "convmon_conversations_unscored_total": "reason",
              "convmon_conversations_routed_total": "route", "convmon_dead_letters_total": "reason",
              "convmon_judge_nonresponse_total": "reason", "convmon_conversations_finished_total": "end_reason"}
    return {name: {labels.get(label, ""): v for n, labels, v in samples if n == name and v}
            for name, label in wanted.items()}


@dataclass
class JudgedRun:
    result: FaultResult
    exported: dict[Key, float]
    truth: dict[Key, float]
    scored: Counter[str]
    llm: dict[str, Any]
    revoked: float  # convmon_conversations_unscored_total{reason="partition_revoked"} of the live workers


@pytest.fixture(scope="module")
def judged_kill_9(broker: str, tmp_path_factory: pytest.TempPathFactory) -> JudgedRun:
    """Whole conversations in 40 parts half a second apart, a quarter of them judged over HTTP; the worker is
    SIGKILLed right after part 10, once it has scored from the stream, and restarted at once."""
    convs = simulated(N, "judged", seed=31)
    ids = [c.conversation_id for c in convs]
    # scraped every 5 s: with the judge's series /metrics is several MB, more than a 1 s scrape timeout renders
    # on a loaded machine
    with FaultRun("judged_kill_9", tmp_path_factory.mktemp("judged"), broker, scrape_s=5.0, judge_rate=RATE) as run:
        run.expect(ids, SCORED)
        run.supervisor.start("a")

        def scoring() -> None:
            run.precondition("worker scoring before the kill", run.wait_progress(0))

        run.produce_in_chunks([whole(c) for c in convs], chunks=40, pace_s=0.5,
                              at={9: scoring, 10: lambda: run.supervisor.kill("a")})
        produced_at = time.time()
        result = run.finish()
        time.sleep(max(0.0, produced_at + SETTLE_S - time.time()))
        live = [scrape(w.url, timeout=30.0) for w in run.supervisor.workers.values() if w.alive()]
        settings = run.settings
        want, scored = truth(broker, settings)
        llm = per_id_llm(broker, settings, ids)
    got = exported(live, totals_names(settings))
    wrong = mismatches(got, want, scored)
    print(f"[judged_kill_9] llm {llm} scored {dict(scored)}; exported series equal to the truth: "
          f"{len(set(got) | set(want)) - len(wrong)} of {len(set(got) | set(want))}; scored exported "
          f"{scored_by_scorer(got)}")
    return JudgedRun(result, got, want, scored, llm,
                     sum(total(s, "convmon_conversations_unscored_total", reason="partition_revoked") for s in live))


def test_judged_kill_9_every_id_scored_once_by_each_scorer(judged_kill_9: JudgedRun) -> None:
    r = judged_kill_9.result
    assert all(r["preconditions"].values()), r["preconditions"]
    # repeats on `scores` after the kill are allowed (at least once there) if every copy is the same score
    assert r["complete"] and r["lost"] == 0 and r["wrong_outcome"] == 0 and r["dead_lettered"] == 0, r.table
    assert r["scored_once_by_score_id"] == N and r["copies_disagree"] == 0 and r["score_id_wrong"] == 0
    llm = judged_kill_9.llm
    assert llm["judged"] >= RATE * N * 0.8, llm  # the judge ran on its share
    # a judge record re-sent after the kill is judged again, and its copy may differ (another LLM answer, or pi
    # when budget pacing changed the boost meanwhile): one of them was counted, and every copy names its score id
    assert llm["score_id_wrong"] == 0, llm
    assert not r["worker_crashes"] and r["agent_crashes"] == 0


def test_judged_kill_9_every_exported_partition_total_equals_the_truth(judged_kill_9: JudgedRun) -> None:
    run = judged_kill_9
    assert run.scored["distilled"] == N and run.scored["llm"] == run.llm["judged"]
    wrong = mismatches(run.exported, run.truth, run.scored)
    assert not wrong, f"{len(wrong)} of {len(run.truth)} series differ: {wrong[:12]}"
    # the corrected rate's terms are among them, with the variance weights of pi < 1
    assert residual(run.exported, "design_weight") > 0 and residual(run.exported, "weight") >= run.scored["llm"]


def residual(totals: dict[Key, float], term: str) -> float:
    """A residual term of the corrected rate, summed over items."""
    return sum(v for (name, _), v in totals.items() if name == f"convmon_partition_rubric_residual_{term}_total")


@pytest.mark.parametrize("input_partitions", [1, 3, 12])
def test_judged_conversations_are_counted_once_whatever_the_input_partition_count(
        broker: str, make_settings, tmp_path: Path, input_partitions: int) -> None:
    """The input topic exists with another partition count than convmon's topics (4): every conversation is
    judged and each verdict counted once, by the owner of its input partition (none ``partition_revoked``)."""
    n = 60
    with OpenAIServer() as judge:
        settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=3.0,
                                 registry_poll_s=1.0, **judge_settings(judge.url))
        assert settings.topic_partitions == 4
        publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
        asyncio.run(ensure_topics(broker, [settings.topic("events")], input_partitions))
        convs = simulated(n, f"layout{input_partitions}", seed=input_partitions)
        names = totals_names(settings)
        with WorkerProcess(settings, tmp_path / "worker.log") as worker:
            produce(broker, settings.topic("events"), [whole(c) for c in convs])
            produced_at = time.time()
            last: list[Sample] = []

            def settled() -> bool:
                nonlocal last
                last = scrape(worker.url, timeout=30.0)
                judged = total(last, "convmon_conversations_scored_total", scorer="llm")
                finished = judged + total(last, "convmon_conversations_unscored_total", reason="partition_revoked")
                return finished >= n and time.time() >= produced_at + SETTLE_S

            try:
                wait_until(settled, timeout=180, interval=1.0, message="every conversation judged or dropped")
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {progress(last)}\n{worker.log()}") from None
            assert worker.alive(), worker.log()
        want, scored = truth(broker, settings)
    assert total(last, "convmon_conversations_unscored_total", reason="partition_revoked") == 0
    assert scored == {"distilled": n, "llm": n}
    got = exported([last], names)
    wrong = mismatches(got, want, scored)
    assert not wrong, f"{len(wrong)} of {len(want)} series differ: {wrong[:12]}"
    # every verdict paired with its conversation's distilled probabilities: w = 1 per item (pi = 1), and the
    # variance terms exported at 0 (q = 0), so the standard error exists
    items = len(load_rubric_set(settings.rubric_set, settings.prompts_dir).items)
    assert residual(got, "weight") == n * items
    design = {labels for (name, labels) in got if name == "convmon_partition_rubric_residual_design_weight_total"}
    assert len(design) == items and residual(got, "design_weight") == 0
