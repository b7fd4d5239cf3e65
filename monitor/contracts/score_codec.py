"""The scores topic's wire format: a compact record (``schema_version`` 2, 3 or 4).

A record lists per-item values in the rubric set's item order instead of one object per item,
so it stays a few hundred bytes (the full form of the first releases was ~2.7 KB; no longer read):
``p`` probabilities (3 decimals, ``null`` for an item the record does not carry), ``s`` judge
scores, and bit masks ``y`` (verdict yes), ``k`` (verdict known) and ``u`` (uncertain), bit ``j``
for the j-th rubric item. Decoding needs the rubric set the record names (id and version).

Version 3 is version 2 plus the router's inclusion probability ``pi`` and ``by`` (what sampled the
conversation: hash, uncertainty or feedback) on judge records. Only records that carry them are written
as version 3, so distilled records stay version 2 and readers from before version 3 keep reading them.
Version 4 is version 3 plus ``ev``, the judge's provenance (:class:`monitor.contracts.evaluator.Evaluator`),
written only on judge records that carry it.
Version 5 is version 4 plus ``rv``, the conversation's revision (a conversation re-scored after its user came
back), written only on records of a revision above 1: first scorings keep the version they had.
"""

from __future__ import annotations

from typing import Any

import orjson

from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.scores import ScoreRecord

SCHEMA_VERSION = 5  # the newest version written; decode_score reads 2 to 5
READABLE = (2, 3, 4, 5)
# Header on every record of the scores topic: its stable identity, the same on every copy of it. The topic is at
# least once (a batch re-processed after a crash or a rebalance sends its records again, and the embedded broker
# has no usable Kafka transactions), so a consumer that needs each score once keeps the first record per id.
SCORE_ID_HEADER = "convmon-score-id"


REVISION_MARK = "#r"  # between a conversation id and its revision number (2 and up)


def score_id(record: ScoreRecord) -> str:
    """``<scorer>:<conversation_id>`` for a conversation's first scoring, ``<scorer>:<conversation_id>#r<n>`` for
    revision n > 1: one score per conversation, revision and scorer, whatever the record's schema version (a copy
    re-sent across an upgrade is the same score); also the key of the worker's own dedup window. The first
    revision keeps the id it had before revisions existed, so marks and consumers from then still match."""
    base = f"{record.scorer}:{record.conversation_id}"
    return base if record.revision == 1 else f"{base}{REVISION_MARK}{record.revision}"


def score_headers(record: ScoreRecord) -> list[tuple[str, bytes]]:
    return [(SCORE_ID_HEADER, score_id(record).encode())]


def encode_score(record: ScoreRecord, rubric: RubricSet) -> bytes:
    """The compact bytes of ``record`` (v4 when it carries an evaluator, v3 when it carries an inclusion
    probability, else v2); items the
    rubric set does not know are not representable and dropped
    (the exporter skips and counts them before a record is encoded).

    One pass over the rubric's items for the masks, then only the value lists the record has: half the cost of
    one pass per field (every record on the hot path is encoded). tests/data/score_codec_golden.jsonl pins the
    bytes."""
    by_id = {item.item_id: item for item in record.items}
    items = [by_id.get(item.id) for item in rubric.items]
    yes = known = unsure = present = 0
    any_p = any_s = any_ms = False
    bit = 1
    for i in items:
        if i is not None:
            present |= bit
            if i.verdict is not None:
                known |= bit
                if i.verdict:
                    yes |= bit
            if i.uncertain:
                unsure |= bit
            any_p = any_p or i.probability is not None
            any_s = any_s or i.score is not None
            any_ms = any_ms or i.mass is not None
        bit <<= 1
    out: dict[str, Any] = {
        "schema_version": 2, "conversation_id": record.conversation_id, "scorer": record.scorer,
        "judge": record.judge, "rubric_set": record.rubric_set, "rubric_version": record.rubric_version,
        "model_version": record.model_version, "R": round(record.R, 4), "y": yes, "k": known,
        "scored_at": round(record.scored_at, 3), "latency_s": round(record.latency_s, 6),
    }
    if any_p:
        out["p"] = [None if i is None or i.probability is None else round(i.probability, 3) for i in items]
    if any_s:
        out["s"] = [None if i is None or i.score is None else round(i.score, 2) for i in items]
    if any_ms:
        out["ms"] = [None if i is None or i.mass is None else round(i.mass, 3) for i in items]
    if unsure:
        out["u"] = unsure
    if not present:
        out["n"] = 0  # no items at all (kept apart from "every item present")
    elif present != bit - 1:
        out["n"] = present
    optional = {"satisfaction": record.satisfaction, "feedback": record.feedback or None,
                "metadata": record.metadata or None, "tokens": record.tokens or None,
                "cost_usd": record.cost_usd or None, "span": record.span, "response_id": record.response_id}
    out.update({k: v for k, v in optional.items() if v is not None})
    if record.shadow:
        out["shadow"] = True
    if record.incomplete:  # only with incomplete_conversations=score: readers before it reject the field
        out["incomplete"] = True
    if record.sample_weight != 1.0:
        out["sample_weight"] = record.sample_weight
    if record.inclusion_probability is not None or record.sampled_by is not None:
        out["schema_version"] = 3
        if record.inclusion_probability is not None:
            out["pi"] = record.inclusion_probability
        if record.sampled_by is not None:
            out["by"] = record.sampled_by
    if record.evaluator is not None:
        out["schema_version"] = 4
        out["ev"] = record.evaluator.model_dump()
    if record.revision != 1:
        out["schema_version"] = 5
        out["rv"] = record.revision
    return orjson.dumps(out)


def decode_score(raw: bytes, rubric: RubricSet) -> ScoreRecord:
    """A record back into a :class:`ScoreRecord`; ``ValueError`` (pydantic's included) on anything invalid."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    version = obj.pop("schema_version", None)
    if version not in READABLE:
        raise ValueError(f"unknown schema_version {version!r}")
    sampling = {"inclusion_probability": obj.pop("pi", None), "sampled_by": obj.pop("by", None),
                "evaluator": obj.pop("ev", None)}
    revision = obj.pop("rv", 1)
    if version != 5 and revision != 1:
        raise ValueError("rv appears only in schema_version 5 records")
    if version == 2 and any(v is not None for v in sampling.values()):
        raise ValueError("pi, by and ev appear only in schema_version 3 and 4 records")
    if version == 3 and sampling["evaluator"] is not None:
        raise ValueError("ev appears only in schema_version 4 records")
    if (obj.get("rubric_set"), obj.get("rubric_version")) != (rubric.id, rubric.version):
        raise ValueError(f"record for rubric {obj.get('rubric_set')}@{obj.get('rubric_version')}, "
                         f"this worker reads {rubric.id}@{rubric.version}")
    n = len(rubric.items)
    lists = {name: obj.pop(name, None) or [None] * n for name in ("p", "s", "ms")}
    if any(not isinstance(values, list) or len(values) != n for values in lists.values()):
        raise ValueError(f"per-item lists must have {n} entries (the rubric's items)")
    masks = {name: obj.pop(name, 0) for name in ("y", "k", "u")}
    present = obj.pop("n", (1 << n) - 1)
    if not all(isinstance(m, int) for m in (*masks.values(), present)):
        raise ValueError("bit masks y, k, u, n must be integers")
    items = []
    for j, item in enumerate(rubric.items):
        if not present >> j & 1:
            continue
        known = masks["k"] >> j & 1
        items.append({"item_id": item.id, "polarity": item.polarity,
                      "verdict": bool(masks["y"] >> j & 1) if known else None,
                      "probability": lists["p"][j], "score": lists["s"][j], "mass": lists["ms"][j],
                      "uncertain": bool(masks["u"] >> j & 1)})
    return ScoreRecord.model_validate({**obj, **sampling, "items": items, "revision": revision})
