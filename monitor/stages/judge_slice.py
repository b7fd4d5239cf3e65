"""The judge's slice of a batch's finished conversations: each conversation whose draw falls under its inclusion
probability pi(x) (stages/sampler.py: the hash rate, raised by the distilled scores' uncertainty in the same batch
and by negative feedback) becomes a judge-topic record tagged with pi, its weight 1/pi and the partition whose
writer counts its verdict."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import orjson

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.scores import ScoreRecord
from monitor.stages.sampler import InclusionPolicy
from monitor.stages.sends import DISTILLED, PI, REVISION, SAMPLED_BY, SOURCE_PARTITION, WEIGHT, Send


def judge_slice(policy: InclusionPolicy, metrics: Metrics, closed: Sequence[tuple[Conversation, int]], *,
                judge_configured: bool, judge_accepting: bool, boost: bool = True,
                records: Sequence[ScoreRecord] = (), revisions: Mapping[int, int] | None = None) -> list[Send]:
    """The conversations whose draw falls under their pi(x), as judge-topic records carrying pi and 1/pi.

    With no judge endpoint configured, a sampled conversation without simulated truth is counted as
    ``unjudged`` (``convmon_conversations_routed_total{route="unjudged"}``) and not sent.

    ``records`` are the distilled scores of this batch (none while no model is live): their
    uncertainty raises pi. ``boost=False`` (budget pacing) keeps pi at the hash rate, and that is the
    pi recorded. An exhausted budget sends nothing (counted as ``budget_exhausted``).
    """
    scored: Mapping[str, ScoreRecord] = {r.conversation_id: r for r in records}
    sends = []
    decisions: Counter[str] = Counter()
    sampled: Counter[str] = Counter()
    for conversation, partition in closed:
        cid = conversation.conversation_id
        record = scored.get(cid)
        probabilities = [i.probability for i in record.items if i.probability is not None] if record else None
        feedback = conversation.feedback.model_dump(exclude_none=True) if conversation.feedback else None
        decision = policy.decide(cid, probabilities=probabilities, feedback=feedback, boost=boost,
                                 model_version=record.model_version if record else None)
        if not decision.judge:
            decisions["not_sampled"] += 1
            continue
        if not judge_configured and conversation.simulated_truth is None:
            decisions["unjudged"] += 1
            continue
        if not judge_accepting:
            decisions["budget_exhausted"] += 1
            continue
        decisions["sample"] += 1
        sampled[decision.sampled_by] += 1
        raw = orjson.dumps(conversation.model_dump(mode="json", exclude_none=True))
        headers = [(WEIGHT, repr(decision.weight).encode()), (PI, repr(decision.pi).encode()),
                   (SAMPLED_BY, decision.sampled_by.encode()), (SOURCE_PARTITION, str(partition).encode())]
        if record is not None:
            headers.append((DISTILLED, orjson.dumps({i.item_id: i.probability for i in record.items
                                                     if i.probability is not None})))
        revision = (revisions or {}).get(id(conversation), 1)
        if revision != 1:
            headers.append((REVISION, str(revision).encode()))
        sends.append(Send(cid.encode(), raw, headers, partition=partition))
    for reason, n in decisions.items():
        metrics.routed.labels(reason).inc(n)
    for by, n in sampled.items():
        metrics.judge_sampled.labels(by).inc(n)
    return sends
