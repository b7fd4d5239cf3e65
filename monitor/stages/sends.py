"""What a stage asks the runtime to send: a record (key, value, headers), and the headers a judge-topic record
carries (read back by the judge stage and by the writer that counts its verdict)."""

from __future__ import annotations

from dataclasses import dataclass

WEIGHT = "convmon-sample-weight"  # header on a judge-topic record: the router's importance weight 1 / pi
PI = "convmon-inclusion-probability"  # header on a judge-topic record: pi(x) at decision time
SAMPLED_BY = "convmon-sampled-by"  # header on a judge-topic record: hash, uncertainty or feedback
# header on a judge-topic record: the input partition whose owner counts its verdict (stages/judging.py)
SOURCE_PARTITION = "convmon-source-partition"
# header on a judge-topic record: the distilled probabilities ({item id: p}) the conversation was scored with, so
# its verdict adds the residuals of the corrected rate (stages/corrected.py)
DISTILLED = "convmon-distilled"
# header on a judge-topic record: the conversation's revision (above 1 when it was reopened), its verdict's too
REVISION = "convmon-revision"


@dataclass(frozen=True)
class Send:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp: float | None = None  # seconds; None: the producer's clock
    partition: int | None = None  # None: by the key; the agent maps it onto the topic's partitions
