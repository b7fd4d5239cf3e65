from __future__ import annotations

import pytest

from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation
from monitor.judge.redact import Redactor, luhn_valid, redact_conversation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("write to jane.doe+x@mail.example.co.uk today", "write to [EMAIL] today"),
        ("call +1 (415) 555-0100 now", "call [PHONE] now"),
        ("tel 020 7946 0958", "tel [PHONE]"),
        ("card 4111 1111 1111 1111.", "card [CARD]."),
        ("card 5500-0000-0000-0004", "card [CARD]"),
        ("order 4111 1111 1111 1112", "order 4111 1111 1111 1112"),  # fails Luhn: not a card
        ("server 10.0.0.254 is down", "server [IP] is down"),
        ("v6 2001:db8::ff00:42:8329 ok", "v6 [IP] ok"),
        ("not an ip 999.1.1.1", "not an ip 999.1.1.1"),
        ("meet on 2024-01-15 at 12:30", "meet on 2024-01-15 at 12:30"),
        ("the 2019-2023 period", "the 2019-2023 period"),
        ("I paid 300 dollars in 2024", "I paid 300 dollars in 2024"),
    ],
)
def test_redacts_pii_and_keeps_lookalikes(text: str, expected: str) -> None:
    assert Redactor().redact(text) == expected


def test_luhn() -> None:
    assert luhn_valid("4111111111111111")
    assert not luhn_valid("4111111111111112")


def test_extra_patterns_run_first() -> None:
    redactor = Redactor([r"CUST-\d{6}"])
    assert redactor.redact("account CUST-123456, mail a@b.io") == "account [REDACTED], mail [EMAIL]"


def test_invalid_extra_pattern_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"pii_extra_patterns entry '\(unclosed' is not a valid regular expression"):
        Redactor(["(unclosed"])


def test_redact_conversation_copies_and_keeps_structure() -> None:
    conversation = Conversation.model_validate(
        {
            "conversation_id": "c-9",
            "metadata": {"app": "web"},
            "turns": [
                {"index": 0, "role": "user", "text": "I am bob@example.com"},
                {"index": 1, "role": "assistant", "text": "Hi Bob"},
            ],
        }
    )
    redacted = redact_conversation(conversation)
    assert [t.text for t in redacted.turns] == ["I am [EMAIL]", "Hi Bob"]
    assert redacted.conversation_id == "c-9" and redacted.metadata == {"app": "web"}
    assert conversation.turns[0].text == "I am bob@example.com"  # the original is untouched


def test_a_turn_that_is_all_pii_stays_valid() -> None:
    conversation = Conversation.model_validate(
        {"conversation_id": "c", "turns": [{"index": 0, "role": "user", "text": "x"}]}
    )
    redactor = Redactor([r"^x$"])
    assert redactor.redact_conversation(conversation).turns[0].text == "[REDACTED]"
