"""PII redaction applied to conversation text before it leaves the process (judge, label store).

Replaces e-mail addresses, payment card numbers (Luhn-checked, so order numbers survive), IP
addresses, phone numbers and any configured extra patterns with placeholders such as ``[EMAIL]``.
Order matters: cards before phones (a card number also looks like a long phone number), e-mails
before anything that could eat their digits.

>>> Redactor().redact("mail bob@example.com or call +1 (415) 555-0100")
'mail [EMAIL] or call [PHONE]'
>>> Redactor().redact("card 4111 1111 1111 1111, order 4111 1111 1111 1112")
'card [CARD], order 4111 1111 1111 1112'
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation

_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
# 13-19 digits, optionally grouped by single spaces or dashes.
_CARD = re.compile(r"(?<![\d\-])\d(?:[ \-]?\d){12,18}(?![\d\-])")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Fa-f:])")
# International or national numbers: optional +CC, optional (area), groups separated by space, dot, dash.
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .\-]?)?(?:\(\d{1,4}\)[ .\-]?)?\d{2,4}(?:[ .\-]?\d{2,4}){1,4}(?!\w)")
_MIN_PHONE_DIGITS = 7
# Dates and year ranges look like phone numbers; they are not PII on their own.
_DATE_LIKE = re.compile(
    r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{4}|(?:19|20)\d{2} ?- ?(?:19|20)\d{2}"
)


def luhn_valid(digits: str) -> bool:
    """The payment-card checksum: doubles every second digit from the right."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return "[CARD]" if luhn_valid(digits) else match.group()


def _ipv4(match: re.Match[str]) -> str:
    try:
        ipaddress.IPv4Address(match.group())
    except ValueError:
        return match.group()
    return "[IP]"


def _ipv6(match: re.Match[str]) -> str:
    try:
        ipaddress.IPv6Address(match.group())
    except ValueError:
        return match.group()
    return "[IP]"


def _phone(match: re.Match[str]) -> str:
    text = match.group()
    digits = sum(ch.isdigit() for ch in text)
    # A bare run of digits (no +, parentheses or separators) is more likely an id or a year range.
    structured = any(ch in text for ch in "+( .-")
    if digits < _MIN_PHONE_DIGITS or digits > 15 or not structured or _DATE_LIKE.fullmatch(text):
        return text
    return "[PHONE]"


class Redactor:
    """Replace PII in text with placeholders; ``extra_patterns`` become ``[REDACTED]``.

    Extra patterns are regular expressions (``Settings.pii_extra_patterns``), applied first so a
    deployment can redact its own identifiers (customer numbers, ...) before the generic rules.
    """

    def __init__(self, extra_patterns: Iterable[str] = ()) -> None:
        self.extra_patterns = list(extra_patterns)
        self._extra: list[re.Pattern[str]] = []
        for pattern in self.extra_patterns:
            try:
                self._extra.append(re.compile(pattern))
            except re.error as exc:
                raise ConfigError(
                    f"The pii_extra_patterns entry {pattern!r} is not a valid regular expression: {exc}. "
                    "Fix or remove it (CONVMON_PII_EXTRA_PATTERNS)."
                ) from exc

    def redact(self, text: str) -> str:
        for pattern in self._extra:
            text = pattern.sub("[REDACTED]", text)
        text = _EMAIL.sub("[EMAIL]", text)
        text = _CARD.sub(_card, text)
        text = _IPV4.sub(_ipv4, text)
        text = _IPV6.sub(_ipv6, text)
        return _PHONE.sub(_phone, text)

    def redact_conversation(self, conversation: Conversation) -> Conversation:
        """A copy of the conversation with every turn's text redacted (metadata is left alone)."""
        turns = [
            turn.model_copy(update={"text": self.redact(turn.text) or "[REDACTED]"}) for turn in conversation.turns
        ]
        return conversation.model_copy(update={"turns": turns})


def redact_conversation(conversation: Conversation, redactor: Redactor | None = None) -> Conversation:
    """Convenience wrapper: redact with the default rules unless a configured redactor is given."""
    return (redactor or Redactor()).redact_conversation(conversation)
