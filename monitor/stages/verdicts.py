"""Verdict records: a judge's answer for one conversation, sent back to the conversation's partition.

The judge loop is stateless: it sends each verdict to the verdicts topic, in the partition of the input the
conversation was read from (header ``convmon-source-partition``), with the distilled probabilities the hot path
scored it with. That partition's writer counts it (dedup by score id, then totals) and only then sends the ``llm``
score record, so the scores topic and the exported totals agree on which copy counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson
from pydantic import ValidationError

from monitor.contracts.scores import ScoreRecord
from monitor.stages.judging import Verdict, distilled_probabilities
from monitor.stages.sends import DISTILLED, SOURCE_PARTITION, Send


def verdict_record(verdict: Verdict) -> Send:
    headers = [(SOURCE_PARTITION, str(verdict.partition).encode())]
    if verdict.shadow:
        headers.append((DISTILLED, orjson.dumps(dict(verdict.shadow))))
    return Send(verdict.score.conversation_id.encode(), verdict.score.model_dump_json().encode(), headers,
                partition=verdict.partition)


@dataclass(frozen=True)
class BadVerdict:
    reason: str
    detail: str


def read_verdict(value: bytes | None, headers: Sequence[tuple[str, bytes]], partition: int) -> Verdict | BadVerdict:
    """A verdict record as its partition's writer reads it (the record's own partition is the source's)."""
    try:
        score = ScoreRecord.model_validate_json(value or b"")
    except ValidationError as exc:
        return BadVerdict("invalid_schema", f"verdict record: {exc.error_count()} validation errors")
    if score.scorer != "llm":
        return BadVerdict("invalid_schema", f"verdict record: scorer {score.scorer!r}, not 'llm'")
    return Verdict(score, partition, distilled_probabilities(headers))
