"""The stages the agents call, built once per worker around the faust tables: typed, no ``Any``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from faust.types import TableT

from monitor.contracts.settings import Settings
from monitor.engine.stages import build_stages
from monitor.runtime.app import App, Topics
from monitor.runtime.checkpoint import Checkpoint, exit_for_replay
from monitor.runtime.deadletter import DeadLetters
from monitor.runtime.layout import BrokerLayout, report_layout
from monitor.runtime.ownership import Ownership
from monitor.runtime.seeks import on_gap
from monitor.runtime.tablestore import TableStore
from monitor.runtime.wiring import Pipeline
from monitor.stages.hotpath import HotPath
from monitor.stages.judging import JudgeStage
from monitor.stages.scoring import Scoring


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
    session_store, counts = TableStore(sessions), TableStore(scored)
    stages = build_stages(pipeline, layout, session_store, counts)
    hot, judge, totals = stages.hot, stages.judge, stages.totals
    dead_letters = DeadLetters(topics.dead_letters, pipeline.metrics, max_bytes=s.max_request_bytes,
                               reference=pipeline.exporter.reference, redactor=pipeline.redactor,
                               keep_raw=s.dead_letter_raw)
    checkpoint = Checkpoint(app, topics, dead_letters, pipeline.metrics, counts=counts, sessions=session_store,
                            totals=totals, partitions=s.topic_partitions, on_fatal=exit_for_replay)
    app.checkpoint = checkpoint  # the consumer asks it before every offset commit (runtime/delivery.py)
    return Components(settings=s, pipeline=pipeline, hot=hot, judge=judge, checkpoint=checkpoint, lock=lock,
                      scoring=stages.scoring,
                      # the state's partitions are the re-keyed topic's (the input's too, when it is not forwarded)
                      ownership=Ownership(app, topics.rekeyed.get_topic_name(), hot, lock), tables=(sessions, scored),
                      layout=layout)
