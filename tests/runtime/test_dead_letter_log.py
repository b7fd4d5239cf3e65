"""The worker's dead-letter log line names the reason, the field and an opaque conversation reference: enough
to find the letter with `convmon dead-letters`, never the text or the id."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.judge.reference import ConversationRef
from monitor.runtime.deadletter import DeadLetters


def test_the_log_line_names_reason_field_and_reference(caplog: pytest.LogCaptureFixture) -> None:
    sent: list[dict[str, object]] = []

    class Topic:
        async def send(self, **kwargs: object) -> None:
            sent.append(kwargs)

    reference = ConversationRef(b"k" * 32)
    dlq = DeadLetters(Topic(), Metrics(CollectorRegistry()), reference=reference)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        asyncio.run(dlq.send(b'{"text": "my words"}', b"conv-secret", reason="invalid_schema",
                             detail="field 'turn_index': Input should be a valid integer ('my words')",
                             stage="sessionize", field="turn_index"))
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("dead letter")]
    assert line == (f"dead letter: invalid_schema (field turn_index, conversation {reference('conv-secret')}, "
                    "stage sessionize)")
    assert "conv-secret" not in caplog.text and "my words" not in caplog.text
    assert dict(sent[0]["headers"])["convmon-field"] == b"turn_index"  # type: ignore[arg-type]


def test_references_are_keyed_stable_and_opaque() -> None:
    one, other = ConversationRef(b"k" * 32), ConversationRef(b"j" * 32)
    assert one("a") == one("a") != one("b")
    assert one("a") != other("a")  # keyed: an e-mail-shaped id cannot be confirmed by hashing guesses
