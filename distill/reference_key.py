"""The key of the opaque conversation references (monitor/judge/reference.py), shared through the label store.

``pii_reference_key`` wins when set. Otherwise the first process to ask creates a random 32-byte key in
``<prefix>reference_key`` (one row; a concurrent second creator loses the insert and reads the winner's),
so every worker, ``convmon forget`` and ``convmon inspect`` on the same database compute the same
references, and the score store can resolve them. A deployment on per-host SQLite files should set the
key instead (each file would hold its own).
"""

from __future__ import annotations

import logging
import secrets

import sqlalchemy as sa
from pydantic import SecretStr
from sqlalchemy.dialects import postgresql, sqlite

from distill.store import LabelStore
from monitor.contracts.errors import StoreError
from monitor.judge.reference import ConversationRef

log = logging.getLogger(__name__)


def _table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    return sa.Table(f"{prefix}reference_key", metadata,
                    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                    sa.Column("key_hex", sa.String(128), nullable=False))


def stored_key(store: LabelStore) -> bytes:
    """The database's key (beside the store's labels table, same prefix), created on first use.
    Raises StoreError when the database cannot be reached."""
    metadata = sa.MetaData()
    table = _table(metadata, store.table.name.removesuffix("labels"))
    insert = (sqlite.insert if store.engine.dialect.name == "sqlite" else postgresql.insert)(table)
    candidate = secrets.token_hex(32)

    def work(conn: sa.Connection) -> str:
        metadata.create_all(conn)
        conn.execute(insert.values(id=1, key_hex=candidate).on_conflict_do_nothing(index_elements=["id"]))
        return str(conn.execute(sa.select(table.c.key_hex).where(table.c.id == 1)).scalar_one())

    return bytes.fromhex(store.transact(work, "read the reference key", ensure=False))


def conversation_ref(configured: SecretStr | None, store: LabelStore | None) -> ConversationRef:
    """References with the configured key, else the store's; a store that is down gives a process-local key
    (logged: references then resolve through nothing until the worker restarts with the store up)."""
    if configured is not None:
        return ConversationRef(configured.get_secret_value().encode())
    if store is not None:
        try:
            return ConversationRef(stored_key(store))
        except StoreError as exc:
            log.warning("conversation references use a process-local key (label store unreachable: %s); set "
                        "CONVMON_PII_REFERENCE_KEY so every process shares one", exc)
    return ConversationRef(secrets.token_bytes(32))
