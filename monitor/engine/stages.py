"""The stages one worker runs on its partitions' state, built once from settings around two stores."""

from __future__ import annotations

import time
from dataclasses import dataclass

from monitor.judge.redact import Redactor
from monitor.runtime.layout import BrokerLayout
from monitor.runtime.wiring import Pipeline
from monitor.stages.boundary import InputRedaction, RedactingInput
from monitor.stages.dedup import DedupWindow
from monitor.stages.hotpath import HotPath
from monitor.stages.inputs import build_input
from monitor.stages.judging import JudgeStage
from monitor.stages.revisions import Revisions
from monitor.stages.scoring import Scoring
from monitor.stages.session_store import Store
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals, TotalsCollector


@dataclass(frozen=True)
class Stages:
    hot: HotPath
    scoring: Scoring  # the hot path's outputs classified and routed: what its batch sends
    judge: JudgeStage
    totals: PartitionTotals


def build_stages(pipeline: Pipeline, layout: BrokerLayout, sessions: Store, counts: Store) -> Stages:
    """``sessions`` keeps open conversations; ``counts`` the dedup marks and per-partition totals (one store, so
    a partition's marks and totals are logged in order)."""
    s = pipeline.settings
    limits = Limits(max_turns=s.max_turns, max_chars=s.max_chars, max_bytes=s.max_conversation_bytes,
                    max_metadata_bytes=s.max_metadata_bytes, max_open=s.max_open_conversations)
    sessionizer = Sessionizer(sessions, limits, idle_timeout_s=s.idle_timeout_s,
                              closed_retention_s=s.closed_retention_s, allowed_lateness_s=s.allowed_lateness_s,
                              reopen_window_s=s.reopen_window_s, reopen_max=s.reopen_max_conversations,
                              closed_max=s.max_closed_conversations)
    totals = PartitionTotals(counts, pipeline.metrics.partition_families)
    reopening = s.reopen_window_s > 0
    pipeline.metrics.registry.register(TotalsCollector(totals, pipeline.metrics, retracting=reopening))
    # a scorer's entry outlives every revision that can follow it; both scorers' entries of the kept conversations
    revisions = Revisions(counts, totals.families, enabled=reopening,
                          retention_s=s.reopen_window_s + s.closed_retention_s, max_keys=2 * s.reopen_max_conversations)
    dedup = DedupWindow(counts, window_s=s.dedup_window_s, max_keys=s.dedup_max_keys)
    redaction = InputRedaction(pipeline.redactor or Redactor.from_settings(s.judge), text=not s.pii_raw_internal_topics)
    hot = HotPath(sessionizer, dedup, totals, pipeline.exporter, pipeline.metrics, pipeline.rubric,
                  max_event_bytes=s.max_event_bytes, max_request_bytes=s.max_request_bytes,
                  sample_rate=s.sample_rate, policy=pipeline.policy,
                  decoder=RedactingInput(build_input(s.otel, s.metrics, pipeline.metrics,
                                                     max_event_bytes=s.max_event_bytes), redaction),
                  forward_input=layout.forward, judge_configured=s.judge_configured,
                  incomplete=s.incomplete_conversations, revisions=revisions)  # stages/incomplete.py
    judge = JudgeStage(pipeline.judge, pipeline.calibrate, dedup, totals, pipeline.exporter, pipeline.metrics,
                       pipeline.rubric, sample_rate=s.sample_rate, max_request_bytes=s.max_request_bytes,
                       clock=time.time, revisions=revisions)
    scoring = Scoring(hot, pipeline.classify, pipeline.judge, chunk=s.classify_batch,
                      budget_pacing=s.active_budget_pacing)
    return Stages(hot=hot, scoring=scoring, judge=judge, totals=totals)
