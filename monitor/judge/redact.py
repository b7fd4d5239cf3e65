"""PII redaction applied to conversation text before it leaves the process (judge, label store, dead letters).

Replaces e-mail addresses (also spelled out: ``john dot doe at example dot com``, ``john[at]example[.]com``),
IBANs (mod-97 checked), payment card numbers (Luhn-checked, in any grouping: spaces, dashes, dots or
none, so order numbers survive), IP addresses, phone numbers (found and validated by ``phonenumbers``
for the configured regions; ``+CC`` numbers always) and any configured extra patterns with
placeholders such as ``[EMAIL]``. Order matters: e-mails first, IBANs before cards (an IBAN's digits
may pass Luhn), cards and IPs before phones (a card looks like a long phone number).

>>> Redactor().redact("mail bob@example.com or call +1 (415) 555-0100")
'mail [EMAIL] or call [PHONE]'
>>> Redactor().redact("card 4111.1111.1111.1111, order 4111 1111 1111 1112")
'card [CARD], order 4111 1111 1111 1112'
>>> Redactor().redact("write to john dot doe at example dot com")
'write to [EMAIL]'
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping

import orjson
import phonenumbers

from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation
from monitor.contracts.settings import JudgeSettings

# The local part starts only where a run of its characters starts, and never gives characters back:
# without both, a long run with no "@" is re-scanned from every position (300k characters: a minute).
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]++@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
# Obfuscated e-mails: "john[at]example[.]com", "john (at) example (dot) com", "john @ example.com",
# "john dot doe at example dot com". A bracketed or spaced "@" is deliberate, so any alphabetic TLD
# counts; the bare word " at " also occurs in prose, so it needs a spelled-out or bracketed dot in the
# domain and a common or country TLD ("look at example.com" stays). At most 9 labels a side, taken
# possessively: every word of "a dot b dot c ..." is a possible start, so the chains must be bounded.
_LABEL = r"[A-Za-z0-9%+\-_]++"  # possessive: no separator is a label character, so nothing to give back
_B_AT, _W_AT = r"\s*[\[({<]\s*(?:at|@)\s*[\])}>]\s*", r"\s+at\s+"
_B_DOT, _W_DOT = r"\s*[\[({<]\s*(?:dot|\.)\s*[\])}>]\s*", r"\s+dot\s+"
_DOT = rf"(?:{_B_DOT}|{_W_DOT}|\.)"
_OBFUSCATED_EMAIL = re.compile(
    rf"(?<![\w.@%+\-]){_LABEL}(?:{_DOT}{_LABEL}){{0,8}}+(?P<at>{_B_AT}|{_W_AT}|\s+@\s*|\s*@\s+)"
    rf"(?P<domain>{_LABEL}(?:{_DOT}{_LABEL}){{1,8}}+)",
    re.IGNORECASE,
)
_COMMON_TLD = re.compile(r"com|org|net|edu|gov|mil|info|biz|io|co|me|app|dev|ai|[a-z]{2}", re.IGNORECASE)
# Runs of digit groups joined by single separators (space, dash, dot, slash, underscore); a card is
# searched inside a run at group boundaries, so digits next to a card cannot hide it.
_DIGIT_RUN = re.compile(r"(?<!\w)\d+(?:[ .\-/_]\d+)*(?!\w)")
# IBAN: country code and 2 check digits, compact or in the printed groups of (up to) four characters,
# searched the same way as cards; a following word of 4 characters or less joins only if the checksum says so.
_IBAN_RUN = re.compile(r"(?<!\w)[A-Za-z]{2}\d{2}[A-Za-z0-9]*(?: [A-Za-z0-9]{1,4})*(?!\w)")
_IBAN_START = re.compile(r"[A-Za-z]{2}\d{2}")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Fa-f:])")
CARD_DIGITS = (13, 19)
IBAN_CHARS = (15, 34)


def luhn_valid(digits: str) -> bool:
    """The payment-card checksum: doubles every second digit from the right."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """ISO 13616: the first four characters moved to the end, letters as 10..35, the number mod 97 is 1."""
    iban = iban.upper()
    if not (IBAN_CHARS[0] <= len(iban) <= IBAN_CHARS[1] and iban.isascii() and iban.isalnum()
            and _IBAN_START.match(iban)):
        return False
    return int("".join(str(int(ch, 36)) for ch in iban[4:] + iban[:4])) % 97 == 1


def _checked_spans(text: str, run_re: re.Pattern[str], token_re: str, valid: Callable[[str], bool],
                   bounds: tuple[int, int], starts: Callable[[str], bool] = lambda _: True) -> list[tuple[int, int]]:
    """Spans of whole consecutive tokens of each run whose concatenation has a length within ``bounds``
    and passes ``valid`` (the longest from each start), e.g. ``4111 1111 1111 1111`` in ``12 4111 1111 1111 1111``.
    At most ``bounds[1]`` characters are joined from any start, so a long run costs linear time."""
    spans: list[tuple[int, int]] = []
    for run in run_re.finditer(text):
        tokens = [(run.start() + m.start(), run.start() + m.end(), m.group())
                  for m in re.finditer(token_re, run.group())]
        i = 0
        while i < len(tokens):
            best, value = None, ""
            if starts(tokens[i][2]):
                for j in range(i, len(tokens)):
                    value += tokens[j][2]
                    if len(value) > bounds[1]:
                        break
                    if len(value) >= bounds[0] and valid(value):
                        best = j
            if best is None:
                i += 1
                continue
            spans.append((tokens[i][0], tokens[best][1]))
            i = best + 1
    return spans


def _replace(text: str, spans: Iterable[tuple[int, int]], placeholder: str) -> str:
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + placeholder + text[end:]
    return text


def _obfuscated_email(match: re.Match[str]) -> str:
    domain = match["domain"]
    tld = re.split(_DOT, domain, flags=re.IGNORECASE)[-1]
    if not re.fullmatch(r"[A-Za-z]{2,24}", tld):
        return match.group()
    if re.fullmatch(_W_AT, match["at"], re.IGNORECASE) and not (
        re.search(rf"{_B_DOT}|{_W_DOT}", domain, re.IGNORECASE) and _COMMON_TLD.fullmatch(tld)
    ):
        return match.group()
    return "[EMAIL]"


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


def check_phone_regions(regions: Iterable[str]) -> list[str]:
    """The regions as upper-case ISO codes ``phonenumbers`` knows; a ConfigError naming the setting otherwise."""
    out = [r.upper() for r in regions]
    unknown = [r for r in out if r not in phonenumbers.SUPPORTED_REGIONS]
    if unknown:
        raise ConfigError(f"pii_phone_regions has unknown region codes {unknown}: use ISO 3166 alpha-2 codes "
                          "such as US, GB, DE (CONVMON_PII_PHONE_REGIONS)")
    return out


class Redactor:
    """Replace PII in text with placeholders; ``extra_patterns`` become ``[REDACTED]``.

    Extra patterns are regular expressions (``pii_extra_patterns``), applied first so a deployment can
    redact its own identifiers (customer numbers, ...) before the generic rules. ``phone_regions``
    (``pii_phone_regions``) are the countries whose national-format numbers (``020 7946 0958`` in GB,
    ``4155550100`` in US) are recognised; international ``+CC`` numbers are recognised whatever the list.
    """

    def __init__(self, extra_patterns: Iterable[str] = (), *, phone_regions: Iterable[str] = ("US",)) -> None:
        self.extra_patterns = list(extra_patterns)
        self.phone_regions = check_phone_regions(phone_regions) or ["ZZ"]  # ZZ: international numbers only
        self._extra: list[re.Pattern[str]] = []
        for pattern in self.extra_patterns:
            try:
                self._extra.append(re.compile(pattern))
            except re.error as exc:
                raise ConfigError(
                    f"The pii_extra_patterns entry {pattern!r} is not a valid regular expression: {exc}. "
                    "Fix or remove it (CONVMON_PII_EXTRA_PATTERNS)."
                ) from exc

    @classmethod
    def from_settings(cls, settings: JudgeSettings) -> Redactor:
        return cls(settings.pii_extra_patterns, phone_regions=settings.pii_phone_regions)

    def _phones(self, text: str) -> str:
        for region in self.phone_regions:
            matches = list(phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID))
            text = _replace(text, [(m.start, m.end) for m in matches], "[PHONE]")
        return text

    def redact(self, text: str) -> str:
        for pattern in self._extra:
            text = pattern.sub("[REDACTED]", text)
        text = _EMAIL.sub("[EMAIL]", text)
        text = _OBFUSCATED_EMAIL.sub(_obfuscated_email, text)
        text = _replace(text, _checked_spans(text, _IBAN_RUN, r"[A-Za-z0-9]+", iban_valid, IBAN_CHARS,
                                             starts=lambda t: _IBAN_START.match(t) is not None), "[IBAN]")
        text = _replace(text, _checked_spans(text, _DIGIT_RUN, r"\d+", luhn_valid, CARD_DIGITS), "[CARD]")
        text = _IPV4.sub(_ipv4, text)
        text = _IPV6.sub(_ipv6, text)
        return self._phones(text)

    def redact_metadata(self, metadata: Mapping[str, str]) -> dict[str, str]:
        """Metadata values are producer-supplied free text too (a user id may be an e-mail)."""
        return {key: self.redact(value) for key, value in metadata.items()}

    def redact_conversation(self, conversation: Conversation) -> Conversation:
        """A copy of the conversation with every turn's text and every metadata value redacted."""
        turns = [
            turn.model_copy(update={"text": self.redact(turn.text) or "[REDACTED]"}) for turn in conversation.turns
        ]
        return conversation.model_copy(update={"turns": turns, "metadata": self.redact_metadata(conversation.metadata)})


def redact_conversation(conversation: Conversation, redactor: Redactor | None = None) -> Conversation:
    """Convenience wrapper: redact with the default rules unless a configured redactor is given."""
    return (redactor or Redactor()).redact_conversation(conversation)


# Fields of convmon's event and conversation JSON that identify a record rather than carry user text:
# a dead letter keeps them, so it can still be traced and replayed (a numeric id may pass Luhn).
ID_FIELDS = frozenset({"type", "conversation_id", "turn_index", "index", "role", "timestamp", "ended_at"})
JSONValue = dict[str, "JSONValue"] | list["JSONValue"] | str | int | float | bool | None


def _redact_json(value: JSONValue, redactor: Redactor) -> JSONValue:
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, list):
        return [_redact_json(v, redactor) for v in value]
    if isinstance(value, dict):
        return {k: v if k in ID_FIELDS else _redact_json(v, redactor) for k, v in value.items()}
    return value


def redact_dead_letter(raw: bytes, redactor: Redactor, *, keep_raw: bool = False) -> bytes:
    """What a dead letter carries: the original bytes only when ``dead_letter_raw`` allows it, else the
    redacted record. A record with nothing to redact stays byte for byte; a JSON record is redacted
    field by field (ids kept); anything else as text, with bytes that are not UTF-8 passed through
    (surrogateescape) so ASCII PII inside a binary or Latin-1 payload is still found."""
    if keep_raw:
        return raw
    text = raw.decode("utf-8", "surrogateescape")
    redacted = redactor.redact(text)
    if redacted == text:
        return raw
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return redacted.encode("utf-8", "surrogateescape")
    return orjson.dumps(_redact_json(document, redactor))
