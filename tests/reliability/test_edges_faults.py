"""Faults at the edges, real worker processes, real PostgreSQL, real HTTP judge.

Each test prints one row of a table: produced / labelled / judged /
dead-lettered / lost, per conversation id. Run with ``-m faults``; PostgreSQL outages are short
and always ended in a ``finally`` (other suites share the server), and everything lives in the
``convmon_edges`` schema.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import sqlalchemy as sa

from monitor.contracts.rubric_set import load_rubric_set
from monitor.runtime.scrape import by_label, total
from monitor.tools.openai_server import OpenAIServer
from tests.reliability.pg import SCHEMA, URL, ensure_schema, pg_outage
from tests.support.model_fixtures import publish_distilled_model
from tests.support.traffic import conversations, produce, read_topic, scored
from tests.support.workers import WorkerProcess, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def fresh_schema_tables() -> None:
    ensure_schema()
    engine = sa.create_engine(URL)
    with engine.begin() as conn:
        for table in ("convmon_labels", "convmon_judge_budget"):
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {SCHEMA}.{table}"))
    engine.dispose()


def stored_ids() -> list[str]:
    engine = sa.create_engine(URL)
    try:
        with engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.text(f"SELECT conversation_id FROM {SCHEMA}.convmon_labels"))]
    finally:
        engine.dispose()


def report(name: str, **counts: int) -> None:
    print(f"\nFAULT-ROW | {name} | " + " | ".join(f"{k}={v}" for k, v in counts.items()))


def test_postgresql_outage_then_kill_9_loses_no_label_and_a_nul_id_is_dead_lettered_alone(
    broker: str, make_settings, tmp_path: Path
) -> None:
    """Labels flow into PostgreSQL; PostgreSQL stops; more conversations are judged (one with a NUL in its
    id); the worker is SIGKILLed while PostgreSQL is still down; PostgreSQL returns and a new worker joins
    the group. Every label is stored exactly under its id, the NUL one is a dead letter (label_rejected,
    with the database's reason), nothing is lost. Before the fix, the buffered labels had been
    acknowledged to Kafka and vanished with the process, and the NUL row blocked the sink for good."""
    fresh_schema_tables()
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=2.0,
                             registry_poll_s=1.0, label_store_url=URL)
    publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
    before = conversations(settings, "pgok", 20, seed=3)
    during = conversations(settings, "pgdown", 40, seed=4)
    nul = conversations(settings, "nul\x00", 1, seed=5)
    produced = {c.conversation_id for c in before + during + nul}
    worker = WorkerProcess(settings, tmp_path / "a.log").start()
    try:
        produce(settings, before)
        wait_until(lambda: len(stored_ids()) == 20, 60, message="labels stored before the outage")
        with pg_outage():
            produce(settings, during + nul)
            wait_until(lambda: scored(worker.samples()).get("llm", 0) == 61
                       and total(worker.samples(), "convmon_label_store_errors_total") >= 1, 60,
                       message="everything judged while the store is down")
            worker.kill()  # kill -9 during the outage: the labels waiting in the sink were never acknowledged
    finally:
        worker.stop()
    with WorkerProcess(settings, tmp_path / "b.log") as second:
        wait_until(lambda: len(stored_ids()) == 60, 90, message="every label stored after the restart")
        wait_until(lambda: total(second.samples(), "convmon_label_store_buffered") == 0, 30, message="sink idle")
    letters = [r for r in read_topic(broker, settings.topic("dead-letters"))
               if dict(r.headers).get("convmon-reason") == b"label_rejected"]
    assert {r.key for r in letters} == {b"nul\x00-0"}
    assert b"NUL" in dict(letters[0].headers)["convmon-detail"]
    labelled = set(stored_ids())
    lost = produced - labelled - {"nul\x00-0"}
    assert labelled == produced - {"nul\x00-0"} and not lost
    report("PostgreSQL down + kill -9 during the outage + NUL id", produced=len(produced), labelled=len(labelled),
           judged=len(produced), dead_lettered=len({r.key for r in letters}), lost=len(lost))


def test_budget_exhausted_across_two_workers_and_a_restart(broker: str, make_settings, tmp_path: Path) -> None:
    """Two workers share one daily budget in PostgreSQL; a third lifetime (restart) inherits it.

    The judge server reports a fantastic usage (1e9 tokens) on every answer: each call is booked at
    its local bound instead. Asserted: the ledger never exceeds the limit; both workers stop sending
    to the judge (convmon_judge_budget_exhausted = 1, conversations routed budget_exhausted); after a
    restart the new worker's gauge says exhausted from the ledger alone (before any traffic, with no
    call of its own), it routes nothing to the judge and the judge receives no request; every
    conversation is scored by the distilled path and every one is judged, routed away or
    dead-lettered (budget_exhausted): none lost."""
    fresh_schema_tables()
    limit = 0.02

    def fantastic(body: dict) -> tuple[int, dict, dict]:
        from monitor.tools.stand_in_judge import answer

        text, _ = answer(body)
        return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"}],
                     # absurd billing in the prompt: a completion past max_tokens is refused unread (the token cap)
                     "usage": {"prompt_tokens": 4 * 10**9, "completion_tokens": 10, "total_tokens": 4 * 10**9 + 10}}, {}

    with OpenAIServer(default=fantastic) as server:
        settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=2.0,
                                 registry_poll_s=1.0, label_store_url=URL, openai_base_url=server.url,
                                 openai_api_key="k", judge_daily_budget_usd=limit, judge_concurrency=2,
                                 judge_tokens_per_minute=1e9)  # capped 1e9 claims would hold the rate limiter
        publish_distilled_model(settings, load_rubric_set(settings.rubric_set, settings.prompts_dir))
        first = conversations(settings, "budget", 40, seed=6)
        a = WorkerProcess(settings, tmp_path / "a.log").start()
        b = WorkerProcess(settings, tmp_path / "b.log").start()
        try:
            produce(settings, first, pace_s=0.05)
            seen: list[list[float]] = []

            def distilled_counts() -> list[float]:
                """Per input partition, its owner's running total (as the recording rule takes it: the max over
                workers): counted once across the rebalance the second worker causes, unlike process counters."""
                owners = [by_label(w.samples(), "convmon_partition_conversations_scored_total", "partition",
                                   scorer="distilled") for w in (a, b)]
                seen.append([max(o.get(p, 0) for o in owners) for p in sorted(set().union(*owners))])
                return seen[-1]
            try:
                wait_until(lambda: sum(distilled_counts()) == 40, 240,
                           message="every conversation scored by the distilled path")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; last distilled totals per partition: {seen[-1:]}") from exc
            wait_until(lambda: all(total(w.samples(), "convmon_judge_budget_exhausted") == 1 for w in (a, b)), 60,
                       message="both workers see the budget exhausted")

            def accounted() -> bool:  # conversations routed to the judge before it ran out must drain first
                s = [w.samples() for w in (a, b)]  # (at least once: a rebalance may count one twice)
                return (sum(scored(x).get("llm", 0) for x in s)
                        + sum(by_label(x, "convmon_conversations_routed_total", "route").get("budget_exhausted", 0)
                              for x in s)
                        + sum(total(x, "convmon_dead_letters_total") for x in s)) >= 40
            wait_until(accounted, 60, message="every conversation judged, routed away or dead-lettered")
            samples = [w.samples() for w in (a, b)]
        finally:
            a.stop()
            b.stop()
        engine = sa.create_engine(URL)
        with engine.connect() as conn:
            booked = conn.execute(sa.text(f"SELECT sum(spent_usd) FROM {SCHEMA}.convmon_judge_budget")).scalar()
        engine.dispose()
        assert booked <= limit + 1e-9
        ids = {c.conversation_id for c in first}
        scores = [orjson.loads(r.value) for r in read_topic(broker, settings.topic("scores"))]
        judged = {x["conversation_id"] for x in scores if x["scorer"] == "llm"}
        distilled = {x["conversation_id"] for x in scores if x["scorer"] == "distilled"}
        letters = [r for r in read_topic(broker, settings.topic("dead-letters"))
                   if dict(r.headers)["convmon-stage"] == b"judge"]  # (re-delivered end events: late_event)
        assert {dict(r.headers)["convmon-reason"] for r in letters} <= {b"budget_exhausted"}
        dead = {r.key.decode() for r in letters} - judged
        capped = sum(total(s, "convmon_judge_usage_capped_total") for s in samples)
        assert 0 < len(judged) < 40 and capped >= len(judged)
        assert sum(total(s, "convmon_judge_budget_exhausted") for s in samples) == 2
        assert distilled == ids  # nothing lost: every conversation has a score
        requests_before = len(server.requests)
        later = conversations(settings, "after", 10, seed=7)
        with WorkerProcess(settings, tmp_path / "c.log") as c:
            # the ledger's row (its total and the latest call's size) is all the restarted worker knows
            wait_until(lambda: total(c.samples(), "convmon_judge_budget_exhausted") == 1, 60,
                       message="the restarted worker's gauge follows the ledger before any traffic")
            produce(settings, later)
            wait_until(lambda: scored(c.samples()).get("distilled", 0) >= 10, 60, message="distilled after restart")
            routes = by_label(c.samples(), "convmon_conversations_routed_total", "route")
            assert routes.get("sample", 0) == 0 and routes.get("budget_exhausted", 0) >= 10, routes
            assert total(c.samples(), "convmon_judge_budget_exhausted") == 1
            assert len(server.requests) == requests_before
    report("judge budget across two workers and a restart (1e9-token usage claims)", produced=50,
           labelled=len(judged), judged=len(judged), dead_lettered=len(dead), lost=len(ids - distilled))
