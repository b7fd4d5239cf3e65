"""The stages the agents call, built once per worker around the faust tables: typed, no ``Any``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import faust
from faust.types import TableT

from monitor.contracts.settings import Settings
from monitor.runtime.app import Topics
from monitor.runtime.deadletter import DeadLetters
from monitor.runtime.ownership import Ownership
from monitor.runtime.tablestore import TableStore
from monitor.runtime.wiring import Pipeline
from monitor.stages.dedup import DedupWindow
from monitor.stages.hotpath import HotPath
from monitor.stages.inputs import build_input
from monitor.stages.judging import JudgeStage
from monitor.stages.sessionize import Limits, Sessionizer


@dataclass(frozen=True)
class Components:
    settings: Settings
    pipeline: Pipeline
    hot: HotPath
    judge: JudgeStage
    dead_letters: DeadLetters
    ownership: Ownership
    tables: tuple[TableT[Any, Any], ...]


def build_components(app: faust.App, topics: Topics, pipeline: Pipeline) -> Components:
    s = pipeline.settings
    # Table names are part of the changelog topics' names (<app_id>-sessions-changelog, -scored-changelog).
    sessions = app.Table("sessions", partitions=s.topic_partitions)
    scored = app.Table("scored", partitions=s.topic_partitions)  # the dedup window: "scorer:id" -> [t, partition]
    limits = Limits(max_turns=s.max_turns, max_chars=s.max_chars, max_bytes=s.max_conversation_bytes,
                    max_metadata_bytes=s.max_metadata_bytes)
    sessionizer = Sessionizer(TableStore(sessions), limits, idle_timeout_s=s.idle_timeout_s,
                              closed_retention_s=s.closed_retention_s, allowed_lateness_s=s.allowed_lateness_s)
    dedup = DedupWindow(TableStore(scored), window_s=s.dedup_window_s, max_keys=s.dedup_max_keys)
    hot = HotPath(sessionizer, dedup, pipeline.exporter, pipeline.metrics, pipeline.rubric,
                  max_event_bytes=s.max_event_bytes, max_request_bytes=s.max_request_bytes,
                  sample_rate=s.sample_rate, policy=pipeline.policy,
                  decoder=build_input(s.otel, s.metrics, pipeline.metrics, max_event_bytes=s.max_event_bytes))
    judge = JudgeStage(pipeline.judge, pipeline.calibrate, dedup, pipeline.exporter, pipeline.metrics,
                       pipeline.rubric, sample_rate=s.sample_rate, max_request_bytes=s.max_request_bytes,
                       clock=time.time)
    return Components(settings=s, pipeline=pipeline, hot=hot, judge=judge,
                      dead_letters=DeadLetters(topics.dead_letters, pipeline.metrics, max_bytes=s.max_request_bytes,
                                               redactor=pipeline.redactor, keep_raw=s.dead_letter_raw),
                      ownership=Ownership(app, topics.events.get_topic_name()), tables=(sessions, scored))
