"""PII redaction applied where text enters the process (monitor/stages/boundary.py) and again before the
judge, the label store, dead letters and OTLP events (idempotent: placeholders contain nothing to find).

Finds, on the original text, in this order (each later rule sees the earlier finds masked, so an IBAN's
digits are not also a card, a card not also a phone): ``pii_extra_patterns`` (``[REDACTED]``), e-mail
addresses (also spelled out: ``john dot doe at example dot com``, ``john[at]example[.]com``), IBANs
(mod-97 checked), payment card numbers (Luhn-checked, 12-19 digits in any grouping, so order numbers
survive), US SSNs and UK National Insurance numbers (``[NATIONAL_ID]``), IP addresses, phone numbers
(monitor/judge/pii_phones.py: ``phonenumbers`` in every configured region, ``+CC`` numbers of any country),
street addresses and person names (monitor/judge/pii_names.py: rules with measured, partial recall).
``convmon bench pii`` measures per-type recall on the committed set (tests/data/pii) and the share of
USS tokens redacted; docs/security.md has the numbers.

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
from monitor.judge.pii_names import address_spans, name_spans
from monitor.judge.pii_phones import phone_spans

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
# US SSN (area not 000, 666 or 9xx; group not 00; serial not 0000), with dashes or spaces as written.
_SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\w-])")
# UK National Insurance number: two prefix letters, six digits (in pairs or not), a suffix letter. Issued
# suffixes are A-D, but test and temporary numbers (and Faker's) use others: any letter is taken.
_UK_NI = re.compile(r"(?<!\w)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-Z](?!\w)", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
# Necessary conditions before three digit rules' searches, cheaper because they start at a digit rather than at
# every letter or position (about 12 µs a USS conversation together):
_IBAN_START_BACKWARDS = re.compile(r"\d{2}[A-Za-z]{2}")  # an IBAN's "DE89", searched in the reversed text
_ID_DIGITS = re.compile(r"\d\d ?\d\d ?\d\d|\d{3}[- ]\d\d[- ]\d{4}")  # a UK NI number's or an SSN's digits
_DIGIT_DOT_DIGIT = re.compile(r"\d\.\d")  # in every IPv4 address
_AT_HINT = re.compile(r"[\[({<]\s*(?:at|@)|\sat\s|@", re.IGNORECASE)  # what any obfuscated e-mail holds
_BRACKETS = "[({<"
MASK = "_"  # what an earlier find reads as to later rules: a word character, no digit, no capital
Span = tuple[int, int, str]  # start, end, placeholder label
CARD_DIGITS = (12, 19)
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


def _mask(text: str, spans: Iterable[tuple[int, int]]) -> str:
    for start, end in spans:
        text = text[:start] + MASK * (end - start) + text[end:]
    return text


def _is_obfuscated_email(match: re.Match[str]) -> bool:
    domain = match["domain"]
    tld = re.split(_DOT, domain, flags=re.IGNORECASE)[-1]
    if not re.fullmatch(r"[A-Za-z]{2,24}", tld):
        return False
    return not (re.fullmatch(_W_AT, match["at"], re.IGNORECASE) and not (
        re.search(rf"{_B_DOT}|{_W_DOT}", domain, re.IGNORECASE) and _COMMON_TLD.fullmatch(tld)))


def _may_hold_obfuscated_email(text: str) -> bool:
    """Whether ``_OBFUSCATED_EMAIL`` could find one that ``_is_obfuscated_email`` keeps. An "at" that is a bare
    word is kept only with a bracketed or spelled-out dot in the domain, so text without "@", a bracket or the
    letters "dot" holds none: the search is skipped for most prose with an " at " (1.3 -> 0.3 µs a turn)."""
    if "@" in text:
        return True
    lowered = text.lower()
    if "at" not in lowered or ("dot" not in lowered and not any(b in text for b in _BRACKETS)):
        return False
    return _AT_HINT.search(text) is not None


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _found(pattern: re.Pattern[str], text: str, keep: Callable[[re.Match[str]], bool] = lambda _: True,
           ) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text) if m.end() > m.start() and keep(m)]


# The default national-format regions: the countries of the committed PII set (tests/data/pii), the most
# common chat-assistant markets; each costs one phonenumbers pass over text that holds 7+ digits.
PHONE_REGIONS = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "BR", "IN", "JP", "AU", "PL", "SE", "CA")


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
    (``pii_phone_regions``, default: 14 countries) are the countries whose national-format numbers
    (``020 7946 0958`` in GB, ``4155550100`` in US) are recognised; international ``+CC`` numbers of any
    country are recognised whatever the list.
    """

    def __init__(self, extra_patterns: Iterable[str] = (), *, phone_regions: Iterable[str] = PHONE_REGIONS) -> None:
        self.extra_patterns = list(extra_patterns)
        self.phone_regions = check_phone_regions(phone_regions)  # none: international numbers only
        self._extra: list[re.Pattern[str]] = []
        for pattern in self.extra_patterns:
            try:
                self._extra.append(re.compile(pattern))
            except re.error as exc:
                raise ConfigError(
                    f"The pii_extra_patterns entry {pattern!r} is not a valid regular expression: {exc}. "
                    "Fix or remove it (CONVMON_PII_EXTRA_PATTERNS)."
                ) from exc
        self._finders = self._rules()

    @classmethod
    def from_settings(cls, settings: JudgeSettings) -> Redactor:
        return cls(settings.pii_extra_patterns, phone_regions=settings.pii_phone_regions)

    def _rules(self) -> list[tuple[str, int, Callable[[str], list[tuple[int, int]]]]]:
        """(placeholder label, digits needed, finder) in the order they run; each finder reads the text with
        earlier finds masked. A rule is skipped for text with fewer digits than any of its finds holds (most chat
        turns have none, or a time or a price): it could find nothing there."""
        return [
            *(("REDACTED", 0, lambda t, p=pattern: _found(p, t)) for pattern in self._extra),
            ("EMAIL", 0, lambda t: _found(_EMAIL, t) if "@" in t else []),
            ("EMAIL", 0, lambda t: _found(_OBFUSCATED_EMAIL, t, _is_obfuscated_email)
             if _may_hold_obfuscated_email(t) else []),
            ("IBAN", 2, lambda t: _checked_spans(t, _IBAN_RUN, r"[A-Za-z0-9]+", iban_valid, IBAN_CHARS,
                                                 starts=lambda tok: _IBAN_START.match(tok) is not None)
             if _IBAN_START_BACKWARDS.search(t[::-1]) else []),
            ("CARD", CARD_DIGITS[0], lambda t: _checked_spans(t, _DIGIT_RUN, r"\d+", luhn_valid, CARD_DIGITS)),
            ("NATIONAL_ID", 6, lambda t: _found(_SSN, t) + _found(_UK_NI, t)  # SSN 9 digits, UK NI 6
             if _ID_DIGITS.search(t) else []),
            ("IP", 4, lambda t: _found(_IPV4, t, lambda m: _is_ip(m.group())) if _DIGIT_DOT_DIGIT.search(t) else []),
            ("IP", 0, lambda t: _found(_IPV6, t, lambda m: _is_ip(m.group())) if "::" in t or t.count(":") > 2
             else []),
            ("PHONE", 6, lambda t: phone_spans(t, self.phone_regions)),  # its candidates hold 6 digits or more
            ("ADDRESS", 1, address_spans),
            ("NAME", 0, name_spans),
        ]

    def spans(self, text: str) -> list[Span]:
        """What would be redacted, as (start, end, label) on ``text`` itself, sorted and not overlapping."""
        found: list[Span] = []
        masked = text
        digits = len(_DIGIT.findall(text))  # masking only removes digits, so no rule needs more than these
        for label, needs_digits, finder in self._finders:
            if digits < needs_digits:
                continue
            new = finder(masked)
            if new:
                found += [(start, end, label) for start, end in new]
                masked = _mask(masked, new)
        merged: list[Span] = []
        for start, end, label in sorted(found):
            if merged and start < merged[-1][1]:  # a later rule's find that runs over an earlier one
                last = merged[-1]
                merged[-1] = (last[0], max(last[1], end), last[2])
            else:
                merged.append((start, end, label))
        return merged

    def redact(self, text: str) -> str:
        for start, end, label in reversed(self.spans(text)):
            text = f"{text[:start]}[{label}]{text[end:]}"
        return text

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
