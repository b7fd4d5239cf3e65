"""What a batch sends (:class:`Delivery`), and the hot path's scoring step that fills one; plain, no faust.

A delivery is everything one batch (of the hot path, the sweep, the judge, a sink) puts on the broker
besides its table writes. The checkpoint sends it, then the counts, and checks every delivery before the
batch's input offsets may commit (runtime/checkpoint.py). :class:`Scoring` turns the hot path's outputs into
one: the closed conversations classified in chunks off the event loop, the judge slice drawn with their
distilled uncertainty, the distilled scores counted once each (stages/hotpath.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from monitor.contracts.events import Conversation
from monitor.contracts.scores import ScoreRecord
from monitor.judge.base import Judge
from monitor.stages.deadletter import DeadLetter
from monitor.stages.hotpath import HotPath, Outputs
from monitor.stages.sends import Send


@dataclass
class Delivery:
    rekey: list[Send] = field(default_factory=list)  # to convmon's re-keyed topic, never the input
    dead: list[DeadLetter] = field(default_factory=list)
    judge: list[Send] = field(default_factory=list)
    scores: list[Send] = field(default_factory=list)
    labels: list[Send] = field(default_factory=list)


class Scoring:
    def __init__(self, hot: HotPath, classify: Callable[[list[Conversation]], list[ScoreRecord]], judge: Judge, *,
                 chunk: int, budget_pacing: bool) -> None:
        self.hot = hot
        self.classify = classify
        self.judge = judge
        self.chunk = chunk
        self.budget_pacing = budget_pacing  # boosts pause while the judge's spend runs ahead of the day

    async def __call__(self, out: Outputs) -> Delivery:
        hot, delivery = self.hot, Delivery(rekey=out.rekey, dead=out.dead)
        accepting = self.judge.accepting()
        boost = hot.policy.boosted and (not self.budget_pacing or self.judge.on_pace())
        for start in range(0, len(out.closed), self.chunk):
            chunk = out.closed[start:start + self.chunk]
            records = await asyncio.get_running_loop().run_in_executor(None, self.classify, [cv for cv, _ in chunk])
            if out.revisions and len(records) == len(chunk):  # one record per conversation, in order
                records = [r if (n := out.revisions.get(id(cv), 1)) == 1 else r.model_copy(update={"revision": n})
                           for r, (cv, _) in zip(records, chunk, strict=True)]
            judged = hot.judge_slice(chunk, judge_accepting=accepting, boost=boost, records=records,
                                     revisions=out.revisions)
            delivery.judge += judged
            delivery.scores += hot.count(hot.mark_shadows(records, judged), {cv.conversation_id: p for cv, p in chunk},
                                         time.time())
        return delivery
