"""The worker's dead-letter log line names the reason, the field and an opaque conversation reference: enough
to find the letter with `convmon dead-letters`, never the text or the id."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.runtime.deadletter import DeadLetters
from monitor.stages.deadletter import conversation_ref


def test_the_log_line_names_reason_field_and_reference(caplog: pytest.LogCaptureFixture) -> None:
    sent: list[dict[str, object]] = []

    class Topic:
        async def send(self, **kwargs: object) -> None:
            sent.append(kwargs)

    dlq = DeadLetters(Topic(), Metrics(CollectorRegistry()))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        asyncio.run(dlq.send(b'{"text": "my words"}', b"conv-secret", reason="invalid_schema",
                             detail="field 'turn_index': Input should be a valid integer ('my words')",
                             stage="sessionize", field="turn_index"))
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("dead letter")]
    assert line == (f"dead letter: invalid_schema (field turn_index, conversation {conversation_ref('conv-secret')}, "
                    "stage sessionize)")
    assert "conv-secret" not in caplog.text and "my words" not in caplog.text
    assert dict(sent[0]["headers"])["convmon-field"] == b"turn_index"  # type: ignore[arg-type]


def test_references_are_stable_short_and_opaque() -> None:
    assert conversation_ref("a") == conversation_ref(b"a") != conversation_ref("b")
    assert len(conversation_ref("a")) == 14 and conversation_ref(None) == "-"
