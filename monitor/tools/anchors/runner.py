"""``convmon anchors run``: the one owner that re-judges the anchor set and says whether the judge drifted.

Every ``anchors_check_s`` it reads the judge's provenance; a run is due when the baseline has none yet, when
the provenance differs from the latest run's, or ``anchors_interval_s`` after the latest run. A run judges
every anchor with the configured judge, within the judge's daily budget (shared with the workers through the
ledger): once the budget stops accepting, the run ends incomplete and the anchors it reached still count.
After each run every item's two e-processes are recomputed from the stored runs of the current baseline
(:mod:`monitor.drift.anchor_drift`) and exported.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

import numpy as np

from distill.anchor_store import AnchorStore
from monitor.contracts.errors import BudgetExhausted, ConfigError, ConvmonError, JudgeError
from monitor.contracts.metrics_anchors import ANCHOR_TESTS, AnchorMetrics
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.sections import DriftSettings
from monitor.drift.anchor_drift import ItemDrift, evaluate_item
from monitor.judge.base import Judge

log = logging.getLogger("convmon.anchors")
Provenance = Callable[[], Awaitable[dict[str, str]]]


@dataclass(frozen=True)
class RunReport:
    run_id: int
    reason: str
    outcome: str  # complete | incomplete
    judged: int
    failed: int
    calls: int
    cost_usd: float


def theta(run_id: int, ref: str, item_id: str) -> float:
    """A tie-breaking uniform on (0, 1), fixed by the run, anchor and item: re-evaluation gives the same answer."""
    digest = hashlib.blake2b(f"{run_id}/{ref}/{item_id}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 0.5) / 2**64


class AnchorRunner:
    def __init__(self, store: AnchorStore, judge: Judge, rubric: RubricSet, settings: DriftSettings,
                 metrics: AnchorMetrics, provenance: Provenance, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.judge = judge
        self.rubric = rubric
        self.settings = settings
        self.metrics = metrics
        self.provenance = provenance
        self.clock = clock
        self.ran = False  # whether this process ran one: before, the last-run gauge is read from the store

    def current_set(self) -> tuple[str, str, int]:
        found = self.store.latest_version(self.settings.anchors_set)
        if found is None:
            raise ConfigError(f"no anchor set named {self.settings.anchors_set!r} is loaded: run `convmon anchors "
                              "load FILE` first (CONVMON_ANCHORS_SET)")
        return self.settings.anchors_set, found[0], found[1]

    def due(self, current: dict[str, str]) -> str | None:
        """Why a run is due now ("first", "provenance", "schedule"), or None."""
        name, version, epoch = self.current_set()
        runs = self.store.runs(name, version, epoch)
        if not runs:
            return "first"
        if runs[-1].provenance != current:
            return "provenance"
        if self.clock() - runs[-1].started_at >= self.settings.anchors_interval_s:
            return "schedule"
        return None

    async def run(self, reason: str, current: dict[str, str]) -> RunReport:
        """Re-judge every anchor of the set once; stops early (incomplete) when the budget is spent."""
        name, version, epoch = self.current_set()
        if reason == "provenance":
            self.metrics.provenance_changed.set(self.clock())
        run_id = self.store.start_run(name, version, epoch, reason=reason, provenance=current, now=self.clock())
        judged = failed = calls = 0
        cost = 0.0
        outcome = "complete"
        for anchor in self.store.anchors(name, version):
            if not self.judge.accepting():
                outcome = "incomplete"
                break
            calls += 1
            self.metrics.calls.inc()
            try:
                score = await self.judge.score(anchor.conversation)
            except BudgetExhausted:
                outcome = "incomplete"
                break
            except JudgeError as exc:
                failed += 1
                log.warning("anchor run %d: the judge failed on an anchor (%s)", run_id, exc.reason)
                continue
            verdicts = {i.item_id: i.verdict for i in score.items if i.verdict is not None}
            self.store.record(run_id, anchor.ref, verdicts, calls=1, cost_usd=score.cost_usd)
            judged += 1
            cost += score.cost_usd
        self.store.finish_run(run_id, complete=outcome == "complete")
        self.metrics.runs.labels(reason, outcome).inc()
        self.metrics.last_run.set(self.clock())
        self.ran = True
        report = RunReport(run_id, reason, outcome, judged, failed, calls, round(cost, 6))
        log.info("anchor run %s", asdict(report))
        return report

    def evaluate(self) -> dict[str, ItemDrift]:
        """Every item's drift over the current baseline's runs, exported as metrics."""
        name, version, epoch = self.current_set()
        stored = self.store.runs(name, version, epoch)
        runs = [r.run_id for r in stored]
        anchors = self.store.anchors(name, version)
        if not runs:
            return {}
        if not self.ran:  # a restarted owner: the stored run's start, not 0 (an alert would read a day-old age)
            self.metrics.last_run.set(stored[-1].started_at)
        col = {a.ref: j for j, a in enumerate(anchors)}
        row = {run_id: i for i, run_id in enumerate(runs)}
        items = self.rubric.item_ids
        cube = np.full((len(items), len(runs), len(anchors)), np.nan)
        index = {item: k for k, item in enumerate(items)}
        for run_id, ref, item_id, verdict in self.store.verdicts(runs):
            if item_id in index and ref in col:
                cube[index[item_id], row[run_id], col[ref]] = float(verdict)
        alpha = self.settings.anchors_alpha / len(items)  # Bonferroni over the rubric's items
        out: dict[str, ItemDrift] = {}
        for item in items:
            human = np.array([float(a.human[item]) if item in a.human else np.nan for a in anchors])
            thetas = np.array([[theta(r, a.ref, item) for a in anchors] for r in runs])
            out[item] = drift = evaluate_item(cube[index[item]], human, thetas, alpha=alpha)
            self._export(item, drift)
        return out

    def _export(self, item: str, drift: ItemDrift) -> None:
        m = self.metrics
        m.drift.labels(item).set(1.0 if drift.drifted else 0.0)
        for test, value in zip(ANCHOR_TESTS, (drift.evalue_verdicts, drift.evalue_humans), strict=True):
            m.evalue.labels(item, test).set(value)
        for run, yes, agree in (("baseline", drift.yes_baseline, drift.human_agreement_baseline),
                                ("latest", drift.yes_latest, drift.human_agreement_latest)):
            m.yes_ratio.labels(item, run).set(yes)
            m.human_agreement.labels(item, run).set(agree)

    async def tick(self) -> RunReport | None:
        """One check: read the provenance, run if due, re-evaluate."""
        current = await self.provenance()
        reason = self.due(current)
        report = await self.run(reason, current) if reason else None
        self.evaluate()
        return report

    async def serve(self, stop: asyncio.Event) -> None:
        """Check every ``anchors_check_s`` until ``stop``; a failed check is logged and retried at the next."""
        while not stop.is_set():
            try:
                await self.tick()
            except ConvmonError as exc:  # the store or the judge is down, or no set is loaded yet
                log.warning("anchor check failed, retried in %gs: %s", self.settings.anchors_check_s, exc)
                self.metrics.runs.labels("schedule", "failed").inc()
            try:
                await asyncio.wait_for(stop.wait(), timeout=self.settings.anchors_check_s)
            except TimeoutError:
                pass
