"""Human labels: what a reviewer (or an imported file) says of a judged conversation, per rubric item.

One row per (conversation, item) in ``<prefix>human_labels`` beside the judge's labels: the person's answer
(``yes``/``no`` for a rubric item, ``sat``/``dsat`` for the ``overall`` row), the judge's verdict it was compared
with, and, for labels from the review queue, the conversation's inclusion probability and judge-slice weight,
which the agreement estimates need. Human labels never reach the scores topic or the rate counters (those stay
``llm`` and ``distilled``). A later label of the same conversation and item replaces the earlier one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Literal

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.dialects import postgresql, sqlite

from distill.label_record import LabelRecord
from distill.store import DAY_S, LabelStore
from monitor.contracts.rubric_set import RubricSet

OVERALL = "overall"
Source = Literal["review", "import", "feedback"]


class HumanLabel(BaseModel):
    """One person's answer for one item of one conversation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    conversation_id: str = Field(min_length=1, max_length=256)
    item_id: str = Field(min_length=1, max_length=128)
    answer: Literal["yes", "no", "sat", "dsat"]
    judge_verdict: bool | None = None
    inclusion_probability: float | None = Field(default=None, gt=0, le=1)
    judge_weight: float = Field(default=1.0, gt=0)
    flagged: bool | None = None
    source: Source = "review"
    labelled_at: float = Field(default_factory=time.time)

    @property
    def human_verdict(self) -> bool:
        return self.answer in ("yes", "dsat")


def label_from(value: object, rubric: RubricSet, *, source: Source) -> HumanLabel:
    """A record read from a file or a topic as a label of ``rubric``; ValueError naming the field otherwise."""
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    try:
        label = HumanLabel.model_validate({"source": source, **value})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ValueError(f"field {'.'.join(str(p) for p in err['loc']) or 'record'!r}: {err['msg']}") from exc
    if label.item_id != OVERALL and label.item_id not in rubric.item_ids:
        raise ValueError(f"field 'item_id': {label.item_id!r} is not an item of {rubric.key} (or 'overall')")
    if (label.item_id == OVERALL) != (label.answer in ("sat", "dsat")):
        raise ValueError("field 'answer': 'overall' takes sat or dsat, an item yes or no")
    return label


def human_table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    return sa.Table(
        f"{prefix}human_labels", metadata,
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("item_id", sa.String(128), nullable=False),
        sa.Column("answer", sa.String(8), nullable=False),
        sa.Column("judge_verdict", sa.Boolean),
        sa.Column("inclusion_probability", sa.Float),
        sa.Column("judge_weight", sa.Float, nullable=False),
        sa.Column("flagged", sa.Boolean),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("labelled_at", sa.Float, nullable=False, index=True),
        sa.PrimaryKeyConstraint("conversation_id", "item_id", name=f"{prefix}human_labels_key"),
    )


class HumanLabelStore:
    """The ``<prefix>human_labels`` table in the label store's database."""

    def __init__(self, labels: LabelStore, *, table_prefix: str = "convmon_") -> None:
        self.labels = labels
        self.metadata = sa.MetaData()
        self.table = human_table(self.metadata, table_prefix)
        self._created = False

    def ensure_table(self) -> None:
        if not self._created:
            self.labels.transact(lambda conn: self.metadata.create_all(conn), "create the human labels table")
            self._created = True

    def upsert(self, labels: Iterable[HumanLabel]) -> int:
        self.ensure_table()
        rows = {(label.conversation_id, label.item_id): label.model_dump() for label in labels}
        if not rows:
            return 0
        dialect = sqlite if self.labels.engine.dialect.name == "sqlite" else postgresql
        insert = dialect.insert(self.table)
        stmt = insert.on_conflict_do_update(
            index_elements=["conversation_id", "item_id"],
            set_={c.name: insert.excluded[c.name] for c in self.table.columns
                  if c.name not in ("conversation_id", "item_id")})
        self.labels.transact(lambda conn: conn.execute(stmt, list(rows.values())), "upsert human labels")
        return len(rows)

    def fetch(self, *, since: float | None = None, item_id: str | None = None,
              conversation_id: str | None = None, source: Source | None = None) -> list[HumanLabel]:
        self.ensure_table()
        t = self.table.c
        query = sa.select(self.table)
        for column, value in ((t.item_id, item_id), (t.conversation_id, conversation_id), (t.source, source)):
            if value is not None:
                query = query.where(column == value)
        if since is not None:
            query = query.where(t.labelled_at >= since)
        found = self.labels.transact(lambda conn: conn.execute(query.order_by(t.labelled_at)).mappings().all(),
                                 "read human labels")
        return [HumanLabel(**dict(row)) for row in found]

    def conversation_ids(self) -> set[str]:
        """Every conversation with at least one human label."""
        self.ensure_table()
        query = sa.select(self.table.c.conversation_id).distinct()
        return {str(c) for c in self.labels.transact(lambda conn: conn.execute(query).scalars().all(),
                                                 "read human labels")}

    def delete_conversations(self, conversation_ids: list[str]) -> int:
        self.ensure_table()
        stmt = sa.delete(self.table).where(self.table.c.conversation_id.in_(conversation_ids))
        return int(self.labels.transact(lambda conn: conn.execute(stmt).rowcount, "delete human labels"))

    def purge(self, *, older_than_days: float, now: float | None = None) -> int:
        self.ensure_table()
        cutoff = (time.time() if now is None else now) - older_than_days * DAY_S
        stmt = sa.delete(self.table).where(self.table.c.labelled_at < cutoff)
        return int(self.labels.transact(lambda conn: conn.execute(stmt).rowcount, "purge human labels"))


def with_human_answers(records: list[LabelRecord], humans: Iterable[HumanLabel]) -> list[LabelRecord]:
    """The judge's labels with each item a person answered set to the person's answer: for retraining, a human
    label wins over the judge's verdict on the same conversation and item."""
    answers = {(h.conversation_id, h.item_id): h.human_verdict for h in humans if h.item_id != OVERALL}
    if not answers:
        return records
    out = []
    for record in records:
        items = [item.model_copy(update={"verdict": answers[key], "uncertain": False})
                 if (key := (record.conversation_id, item.item_id)) in answers else item for item in record.items]
        out.append(record.model_copy(update={"items": items}) if items != record.items else record)
    return out
