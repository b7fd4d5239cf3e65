"""The stages the agents call, built once per worker around the faust tables: typed, no ``Any``."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from faust.types import TableT

from monitor.contracts.settings import Settings
from monitor.judge.redact import Redactor
from monitor.runtime.app import App, Topics
from monitor.runtime.checkpoint import Checkpoint, exit_for_replay
from monitor.runtime.deadletter import DeadLetters
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
from monitor.stages.scoring import Scoring
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals, TotalsCollector


@dataclass(frozen=True)
class Components:
    settings: Settings
    pipeline: Pipeline
    hot: HotPath
    scoring: Scoring  # the hot path's outputs scored: what its batch sends
    judge: JudgeStage
    checkpoint: Checkpoint  # every batch's sends and table writes, checked before its offsets commit
    ownership: Ownership
    tables: tuple[TableT[Any, Any], ...]
    lock: asyncio.Lock  # one hot-path batch (or sweep) at a time; a revocation waits for it
    layout: BrokerLayout  # the input's partitions against convmon's, and whether the broker is Tansu


def build_components(app: App, topics: Topics, pipeline: Pipeline,
                     layout: BrokerLayout | None = None) -> Components:
    """``layout``: the input's partitions read at start (runtime/layout.py); None: as many as convmon's."""
    s = pipeline.settings
    layout = layout or BrokerLayout.matching(s.kafka)
    report_layout(layout, pipeline.metrics)
    lock = asyncio.Lock()
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
    session_store = TableStore(sessions)
    sessionizer = Sessionizer(session_store, limits, idle_timeout_s=s.idle_timeout_s,
                              closed_retention_s=s.closed_retention_s, allowed_lateness_s=s.allowed_lateness_s)
    counts = TableStore(scored)
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
                  forward_input=layout.forward, judge_configured=s.judge_configured,
                  incomplete=s.incomplete_conversations)  # stages/incomplete.py
    judge = JudgeStage(pipeline.judge, pipeline.calibrate, dedup, totals, pipeline.exporter, pipeline.metrics,
                       pipeline.rubric, sample_rate=s.sample_rate, max_request_bytes=s.max_request_bytes,
                       clock=time.time)
    dead_letters = DeadLetters(topics.dead_letters, pipeline.metrics, max_bytes=s.max_request_bytes,
                               reference=pipeline.exporter.reference, redactor=pipeline.redactor,
                               keep_raw=s.dead_letter_raw)
    checkpoint = Checkpoint(app, topics, dead_letters, pipeline.metrics, counts=counts, sessions=session_store,
                            totals=totals, partitions=s.topic_partitions, on_fatal=exit_for_replay)
    app.checkpoint = checkpoint  # the consumer asks it before every offset commit (runtime/delivery.py)
    return Components(settings=s, pipeline=pipeline, hot=hot, judge=judge, checkpoint=checkpoint, lock=lock,
                      scoring=Scoring(hot, pipeline.classify, pipeline.judge, chunk=s.classify_batch,
                                      budget_pacing=s.active_budget_pacing),
                      # the state's partitions are the re-keyed topic's (the input's too, when it is not forwarded)
                      ownership=Ownership(app, topics.rekeyed.get_topic_name(), hot, lock), tables=(sessions, scored),
                      layout=layout)
