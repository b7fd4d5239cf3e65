"""Phone numbers: found by ``phonenumbers`` (PhoneNumberMatcher, POSSIBLE leniency) in every configured region,
then kept only when they look like a phone number someone wrote, not a date or an order number.

A match is a phone number when it is international (``+CC`` or ``00CC``: any of the world's country codes,
whatever the regions; or the region's code without +, as the parser reads it), or national, not shaped like a
date, a year range or a clock range, and either has 7+ digits next to a phone word ("call", "mobile", "Tel:")
or is valid for the region (``is_valid_number``) and written like a phone number (separators, or a leading
trunk 0); six digits (a local number without its area code) must be both. A trailing extension joins it.
The matcher reads only the runs of 6 or more digits in phone punctuation: most chat turns pay one regex search.
"""

from __future__ import annotations

import re

import phonenumbers

# A run of digits and phone punctuation holding a phone number's 6 or more digits: the matcher reads only these
# windows (a character of context either side), not the whole text, once per region.
_CANDIDATE = re.compile(r"\+?\(?\d(?:[\s().\-/]{0,3}\d){5,}\)?")
# Dates, year ranges ("1998-2004", "2023/24") and clock ranges ("0900-1730"); other 4-4 digit groups ("3670-1695",
# a local number in Australia or Sweden) are not dates.
_YEAR = r"(?:1[5-9]|20)\d{2}"
_HHMM = r"(?:[01]\d|2[0-3])[0-5]\d"
_DATE_LIKE = re.compile(
    r"\(?\d{4}[-./]\d{1,2}[-./]\d{1,2}\)?|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}|"
    rf"{_YEAR}\s*[-/]\s*(?:{_YEAR}|\d{{2}})|{_HHMM}\s*[-/]\s*{_HHMM}|\d{{1,2}}:\d{{2}}(?::\d{{2}})?")
_CUE = re.compile(r"\b(?:call|phone|tel|telephone|mobile|cell|cellphone|number|no\.|reach|text|sms|whats ?app|fax|"
                  r"dial|ring|landline|contact|handy|telefon|portable|t[eé]l[eé]fono|celular|numero|número)\b",
                  re.IGNORECASE)
_EXTENSION = re.compile(r"\s*(?:x|ext\.?|extension|#)\s*\d{1,6}\b", re.IGNORECASE)
_SEPARATED = re.compile(r"\d[\s\-./()]+\d")
CUE_WINDOW = 24  # characters either side of the number
# Words that name a phone and nothing else: next to one, any run of 6+ digits in phone punctuation is a number
# (short or oddly written numbers that no region's metadata accepts).
_PHONE_WORD = re.compile(r"\b(?:call|phone|tel|telephone|mobile|cell|cellphone|whats ?app|fax|dial|landline|sms|"
                         r"text|ring)\b(?:\W{1,3}(?:me|us|him|her|them|on|at|is|to|number|no\.?))*\W{0,3}",
                         re.IGNORECASE)
_LOOSE = re.compile(r"(?:\+|00)?\(?\d[\d\s().\-]{4,22}\d(?:\s*(?:x|ext\.?)\s*\d{1,6})?")
_AFTER_DIGITS = re.compile(r"\d[\s.\-]?$")
_WITHOUT_PLUS = phonenumbers.CountryCodeSource.FROM_NUMBER_WITHOUT_PLUS_SIGN
_EDGE = frozenset(" \t\n\r.,;:!?")  # characters no phonenumbers match starts or ends with
_TRUNK = re.compile(r"(?:\+|00)?(\d{1,3})[\s.\-]?$")


def phone_spans(text: str, regions: list[str]) -> list[tuple[int, int]]:
    """Spans of the phone numbers in ``text`` (see the module docstring); ``regions`` empty: international only."""
    candidates = list(_CANDIDATE.finditer(text))
    if not candidates:  # no 6 digits in phone punctuation: no phone number, not even next to a phone word
        return []
    spans: set[tuple[int, int]] = set()
    for candidate in candidates:
        offset = max(0, candidate.start() - 1)
        window = text[offset:candidate.end() + 1]
        # Once a region's span covers the candidate, the others can only find spans inside it (merged away by
        # the redactor) when nothing next to it can join a match: no match starts or ends on a space or these.
        whole = (candidate.start(), candidate.end())
        closed = all(text[i:i + 1] in _EDGE for i in (candidate.start() - 1, candidate.end()) if 0 <= i < len(text))
        # a number written with + carries its country: one region reads it as well as fourteen
        for region in (regions or ["ZZ"])[:1] if candidate.group().startswith("+") else (regions or ["ZZ"]):
            if closed and any(s <= whole[0] and e >= whole[1] for s, e in spans):
                break
            for match in phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.POSSIBLE):
                start, end = offset + match.start, offset + match.end
                trunk = _TRUNK.search(text[max(0, start - 6):start])  # "1 (449) 293-7082": a country code, no +
                cc = str(match.number.country_code)
                written_with_code = _written_with_code(match, region, cc)
                coded = (trunk is not None and trunk[1] == cc) or written_with_code
                if coded or _is_phone(text, start, end, match, international_only=not regions):
                    if coded and trunk is not None:
                        start -= len(trunk.group())
                    ext = _EXTENSION.match(text, end)
                    spans.add((start, ext.end() if ext else end))
    if regions:
        spans.update(_next_to_phone_words(text))
    return sorted(spans)


def _written_with_code(match: phonenumbers.PhoneNumberMatch, region: str, cc: str) -> bool:
    """"1 (449) 293-7082", "44 20 7946 0958": the region's country code written without +. The parser decides (the
    rest must be a possible national number): "31 64 82" in NL is a national number that starts with 31."""
    if re.match(rf"\(?{cc}[\s.\-(]", match.raw_string) is None:
        return False
    number = phonenumbers.parse(match.raw_string, region, keep_raw_input=True)  # the matcher keeps no source
    return number.country_code_source == _WITHOUT_PLUS


def _next_to_phone_words(text: str) -> list[tuple[int, int]]:
    """Runs of 6+ digits in phone punctuation right after (or right before) a word that names a phone."""
    out = []
    for word in _PHONE_WORD.finditer(text):
        for candidate in (_LOOSE.match(text, word.end()),
                          _LOOSE.search(text, max(0, word.start() - 28), word.start())):
            if candidate is None or sum(c.isdigit() for c in candidate.group()) < 6:
                continue
            if candidate.re is _LOOSE and candidate.end() < word.start() - 2:
                continue
            if not _DATE_LIKE.fullmatch(candidate.group().strip()):
                out.append(candidate.span())
    return out


def _is_phone(text: str, start: int, end: int, match: phonenumbers.PhoneNumberMatch, *,
              international_only: bool) -> bool:
    raw = match.raw_string
    if raw.lstrip("( ").startswith(("+", "00", "011")):
        return True
    digits = sum(c.isdigit() for c in raw)
    if international_only or digits < 6 or _DATE_LIKE.fullmatch(raw.strip()):
        return False
    if _AFTER_DIGITS.search(text, max(0, start - 2), start):  # the tail of a longer digit run
        return False
    around = text[max(0, start - CUE_WINDOW):start] + " " + text[end:end + CUE_WINDOW]
    cued = _CUE.search(around) is not None
    if cued and digits >= 7:
        return True
    written_like_one = bool(_SEPARATED.search(raw)) or raw.lstrip("(").startswith("0")
    # six digits (a local number without its area code: "47 52 27") only next to a phone word as well
    return written_like_one and (digits >= 7 or cued) and phonenumbers.is_valid_number(match.number)
