"""The stages the agents call, built once per worker around the faust tables: typed, no ``Any``."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import faust
from faust.types import TableT

from monitor.contracts.settings import Settings
from monitor.judge.redact import Redactor
from monitor.runtime.app import Topics
from monitor.runtime.deadletter import DeadLetters
from monitor.runtime.delivery import DeliveryGuard, install
from monitor.runtime.layout import BrokerLayout, report_layout
from monitor.runtime.ownership import Ownership
from monitor.runtime.seeks import on_gap
from monitor.runtime.tablestore import TableStore
from monitor.runtime.wiring import Pipeline
from monitor.stages.boundary import InputRedaction, RedactingInput
from monitor.stages.dedup import DedupWindow
from monitor.stages.hotpath import HotPath
from monitor.stages.inputs import build_input
from monitor.stages.judging import JudgeStage
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals, TotalsCollector


@dataclass(frozen=True)
class Components:
    settings: Settings
    pipeline: Pipeline
    hot: HotPath
    judge: JudgeStage
    dead_letters: DeadLetters
    ownership: Ownership
    tables: tuple[TableT[Any, Any], ...]
    guard: DeliveryGuard
    sessions: TableStore  # held per hot-path batch until its counts are on the broker (runtime/agents.py)
    lock: asyncio.Lock  # one hot-path batch (or sweep) at a time; a revocation waits for it
    counts: TableStore  # the scored table: dedup marks, totals, commit records
    layout: BrokerLayout  # the input's partitions against convmon's, and whether the broker is Tansu


def exit_for_replay(error: BaseException) -> None:
    """Stop the worker at once, without committing anything more: its successor re-reads from the last commit."""
    logging.getLogger(__name__).critical("exiting after a failed delivery (%s)", type(error).__name__)
    logging.shutdown()
    os._exit(70)  # EX_SOFTWARE; a supervisor (Kubernetes, compose restart policy) starts the successor


def build_components(app: faust.App, topics: Topics, pipeline: Pipeline,
                     layout: BrokerLayout | None = None) -> Components:
    """``layout``: the input's partitions read at start (runtime/layout.py); None: as many as convmon's."""
    s = pipeline.settings
    layout = layout or BrokerLayout.matching(s.kafka)
    report_layout(layout, pipeline.metrics)
    guard = DeliveryGuard(pipeline.metrics, on_fatal=exit_for_replay)
    lock = asyncio.Lock()
    install(app, guard)  # the consumer asks it before every offset commit (runtime/delivery.py)
    on_gap(app, lambda topic, n: pipeline.metrics.gap_offsets.labels(topic).inc(n),  # runtime/seeks.py
           lambda topic, _: pipeline.metrics.rewinds.labels(topic).inc(),
           lambda topic, n: pipeline.metrics.empty_offsets.labels(topic).inc(n))
    # Table names are part of the changelog topics' names (<app_id>-sessions-changelog, -scored-changelog).
    sessions = app.Table("sessions", partitions=s.topic_partitions)
    # the dedup window ("scorer:id" -> [t, partition, batch]) and the per-partition running totals: one
    # changelog, so a partition's marks, totals and commit records stay in order (stages/totals.py)
    scored = app.Table("scored", partitions=s.topic_partitions)
    limits = Limits(max_turns=s.max_turns, max_chars=s.max_chars, max_bytes=s.max_conversation_bytes,
                    max_metadata_bytes=s.max_metadata_bytes, max_open=s.max_open_conversations)
    session_store = TableStore(sessions, guard)
    sessionizer = Sessionizer(session_store, limits, idle_timeout_s=s.idle_timeout_s,
                              closed_retention_s=s.closed_retention_s, allowed_lateness_s=s.allowed_lateness_s)
    counts = TableStore(scored, guard)
    totals = PartitionTotals(counts, pipeline.metrics.partition_families)
    pipeline.metrics.registry.register(TotalsCollector(totals, pipeline.metrics))
    dedup = DedupWindow(counts, window_s=s.dedup_window_s, max_keys=s.dedup_max_keys,
                        sequence=totals.sequence)
    hot = HotPath(sessionizer, dedup, totals, pipeline.exporter, pipeline.metrics, pipeline.rubric,
                  max_event_bytes=s.max_event_bytes, max_request_bytes=s.max_request_bytes,
                  sample_rate=s.sample_rate, policy=pipeline.policy,
                  decoder=RedactingInput(build_input(s.otel, s.metrics, pipeline.metrics,
                                                     max_event_bytes=s.max_event_bytes),
                                         InputRedaction(pipeline.redactor or Redactor.from_settings(s.judge),
                                                        text=not s.pii_raw_internal_topics)),
                  forward_input=layout.forward, judge_configured=s.judge_configured)
    judge = JudgeStage(pipeline.judge, pipeline.calibrate, dedup, totals, pipeline.exporter, pipeline.metrics,
                       pipeline.rubric, sample_rate=s.sample_rate, max_request_bytes=s.max_request_bytes,
                       clock=time.time)
    return Components(settings=s, pipeline=pipeline, hot=hot, judge=judge,
                      dead_letters=DeadLetters(topics.dead_letters, pipeline.metrics, max_bytes=s.max_request_bytes,
                                               reference=pipeline.exporter.reference,
                                               redactor=pipeline.redactor, keep_raw=s.dead_letter_raw,
                                               guard=guard),
                      # the state's partitions are the re-keyed topic's (the input's too, when it is not forwarded)
                      ownership=Ownership(app, topics.rekeyed.get_topic_name(), hot, lock), tables=(sessions, scored),
                      guard=guard, sessions=session_store, lock=lock,
                      counts=counts, layout=layout)
