"""The judge stage: one judge-topic record in, its verdict (and label) out; the verdict counted once by its writer.

The judge loop calls :meth:`JudgeStage.verdict` (no state); the verdict travels on the verdicts topic to the
partition of the conversation's *input* partition (header ``convmon-source-partition``), whose writer calls
:meth:`JudgeStage.count` through the same dedup window and per-partition totals as the distilled scores and
only then produces the ``llm`` score record (monitor/engine). A judge-topic record re-delivered after a crash
is judged again and its verdict re-sent, but counted once. The inclusion probability pi and the weight 1/pi are the
router's (headers ``convmon-inclusion-probability``, ``convmon-sample-weight``, ``convmon-sampled-by``),
recorded on the score and the label, never recomputed; so are the distilled probabilities the conversation
was scored with (``convmon-distilled``), whose residuals against the verdict correct the distilled rate
(stages/corrected.py). A record that yields no score (judge failure, invalid conversation) is non-response:
dead-lettered, counted by reason with its weight.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import orjson

from monitor.contracts.errors import JudgeError
from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.score_codec import encode_score, score_headers, score_id
from monitor.contracts.scores import SampledBy, ScoreRecord
from monitor.judge.base import Judge
from monitor.stages.deadletter import DeadLetter, dead_letter
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.revisions import Revisions, counted
from monitor.stages.route import route
from monitor.stages.scoring import Delivery
from monitor.stages.sends import DISTILLED, PI, REVISION, SAMPLED_BY, SOURCE_PARTITION, WEIGHT, Send
from monitor.stages.totals import PartitionTotals


def sample_weight(headers: Sequence[tuple[str, bytes]], sample_rate: float) -> float:
    """The router's weight from the record's header; for records routed before it carried one, the
    router's decision at the current rate."""
    for k, v in headers:
        if k == WEIGHT:
            try:
                weight = float(v)
            except ValueError:
                break
            if weight > 0 and weight == weight and weight != float("inf"):
                return weight
    return route("", rate=sample_rate, judge_accepting=True).sample_weight if sample_rate > 0 else 1.0


@dataclass(frozen=True)
class Sampling:
    """What the router decided for a judge-topic record."""

    weight: float
    pi: float | None
    sampled_by: SampledBy | None


def sampling(headers: Sequence[tuple[str, bytes]], sample_rate: float) -> Sampling:
    """pi and 1/pi from the router's headers. Records routed before pi was sent (weight only) were all
    hash-slice picks; records with no header at all get the router's decision at the current rate."""
    values = dict(headers)
    pi = _positive(values.get(PI))
    by = (values.get(SAMPLED_BY) or b"").decode(errors="replace")
    if pi is not None and pi <= 1.0:
        return Sampling(1.0 / pi, pi, by if by in ("hash", "uncertainty", "feedback") else None)  # type: ignore[arg-type]
    weight = sample_weight(headers, sample_rate)
    return Sampling(weight, 1.0 / weight if weight >= 1.0 else None, "hash" if WEIGHT in values else None)


def source_partition(headers: Sequence[tuple[str, bytes]], judge_partition: int) -> int:
    """The input partition whose totals count this verdict (header ``SOURCE_PARTITION``); records sent before
    the header existed were keyed like their input, so their judge partition stands in."""
    raw = dict(headers).get(SOURCE_PARTITION)
    return int(raw) if raw is not None and raw.isdigit() else judge_partition


def distilled_probabilities(headers: Sequence[tuple[str, bytes]]) -> dict[str, float]:
    """The distilled probabilities the hot path scored this conversation with (header ``DISTILLED``); none when
    no model was live, for records routed before the header existed, or for a header that is not {id: p in [0, 1]}
    (only convmon writes it: such a verdict is still counted, without the corrected rate's residuals)."""
    raw = dict(headers).get(DISTILLED)
    try:
        value = orjson.loads(raw) if raw is not None else None
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): float(p) for k, p in value.items()
            if isinstance(p, (int, float)) and not isinstance(p, bool) and 0.0 <= p <= 1.0}


def revision_of(headers: Sequence[tuple[str, bytes]]) -> int:
    """The conversation's revision (header ``REVISION``; 1 without it: a first scoring, or routed before)."""
    raw = dict(headers).get(REVISION)
    return int(raw) if raw is not None and raw.isdigit() and int(raw) >= 1 else 1


def _positive(raw: bytes | None) -> float | None:
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and 0 < value < float("inf") else None


@dataclass(frozen=True)
class Verdict:
    """A judged conversation's score, the input partition whose totals count it, and the distilled probabilities
    its residuals are taken against (header ``convmon-distilled``)."""

    score: ScoreRecord
    partition: int
    shadow: Mapping[str, float]


class JudgeStage:
    def __init__(self, judge: Judge, calibrate: Callable[[ScoreRecord], ScoreRecord], dedup: DedupWindow,
                 totals: PartitionTotals, exporter: Exporter, metrics: Metrics, rubric: RubricSet, *,
                 sample_rate: float, max_request_bytes: int, clock: Callable[[], float],
                 revisions: Revisions | None = None) -> None:
        self.judge = judge
        self.revisions = revisions  # the latest revision of a re-scored conversation counts (stages/revisions.py)
        self.calibrate = calibrate
        self.dedup = dedup
        self.totals = totals
        self.exporter = exporter
        self.metrics = metrics
        self.rubric = rubric
        self.sample_rate = sample_rate
        self.max_request_bytes = max_request_bytes
        self.clock = clock

    async def verdict(self, raw: bytes | None, key: bytes | None, partition: int,
                      headers: Sequence[tuple[str, bytes]]) -> tuple[Verdict | None, Delivery]:
        """The judge's verdict on one judge-topic record and its label, uncounted; or its dead letter."""
        out = Delivery()
        conversation: Conversation | None = None
        try:
            conversation = Conversation.model_validate_json(raw or b"")
            score = await self.judge.score(conversation)
        except JudgeError as exc:
            if self.exporter.evaluation_failures is not None and conversation is not None:  # OTLP error events
                self.exporter.evaluation_failures(conversation, exc.reason)
            return None, self._nonresponse(out, raw, key, exc.reason, str(exc), headers)
        except ValueError as exc:
            return None, self._nonresponse(out, raw, key, "invalid_schema", str(exc), headers)
        drawn = sampling(headers, self.sample_rate)
        score = self.calibrate(score).model_copy(update={
            "sample_weight": drawn.weight, "inclusion_probability": drawn.pi, "sampled_by": drawn.sampled_by,
            "revision": revision_of(headers)})
        cid = conversation.conversation_id
        label = {"conversation": conversation.model_dump(mode="json"), "score": score.model_dump(mode="json")}
        out.labels.append(Send(cid.encode(), orjson.dumps(label), []))
        return Verdict(score, source_partition(headers, partition), distilled_probabilities(headers)), out

    def count(self, score: ScoreRecord, partition: int, shadow: Mapping[str, float]) -> bool:
        """Count a verdict once (dedup window, then its partition's totals); whether it goes on the scores topic:
        False for a duplicate or a partition this worker does not own; True, uncounted, for a verdict of a revision
        at or below the one counted (a later revision's verdict came first)."""
        if not self.totals.owns(partition):  # revoked while judging: its next owner re-reads and counts it
            self.metrics.unscored.labels("partition_revoked").inc()
            return False
        if not self.dedup.first(score_id(score), partition, self.clock()):
            self.metrics.duplicates.labels("llm").inc()
            return False
        if self.revisions is not None and self.revisions.stale(score):
            self.metrics.superseded.labels("llm").inc()
            return True
        cid = score.conversation_id
        self.totals.add(partition, counted(self.exporter, self.revisions, [score], partition, self.clock(),
                                           {cid: dict(shadow)} if shadow else None))
        self.totals.commit(partition)
        return True

    def score_record(self, score: ScoreRecord) -> Send:
        return Send(score.conversation_id.encode(), encode_score(score, self.rubric), score_headers(score))

    def _nonresponse(self, out: Delivery, raw: bytes | None, key: bytes | None, reason: str, detail: str,
                     headers: Sequence[tuple[str, bytes]]) -> Delivery:
        self.metrics.judge_nonresponse.labels(reason).inc()
        self.metrics.judge_nonresponse_weight.inc(sampling(headers, self.sample_rate).weight)
        out.dead.append(self._dead(raw, key, reason, detail))
        return out

    def _dead(self, raw: bytes | None, key: bytes | None, reason: str, detail: str) -> DeadLetter:
        return dead_letter(raw, key, reason=reason, detail=detail, stage="judge", max_bytes=self.max_request_bytes)
