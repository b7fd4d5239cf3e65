"""Person names and street addresses, by rule: no NER model installs from PyPI here (docs/security.md), so
this finds what a cue or a street word gives away, and its recall is measured and stated, not promised.

Names: one to three capitalised words after a cue ("my name is", "I'm", "this is", "Mr", "Dr",
"Regards,", "spoke with", "Name:"). Addresses: a house number with capitalised words ending in a capitalised street
word ("221B Baker Street", "83459 Richardson Junctions"; "Street", "Road" and a few more also in lower
case: "10 Downing street"), a street word with a number ("Heinzallee 92",
"Via Roma 12", "Calle Mayor, 5"), or a number before a French/Spanish/Italian street type ("7, avenue
Caron"), then any following ", Town 12345"-like parts that are capitalised words and postcodes.
"""

from __future__ import annotations

import re

_CAP = r"[A-ZÀ-ÖØ-Þ][\w'’\-]*"  # a capitalised word (Unicode letters after the first)
# Cues before a name: followed by an optional "." and spaces, by a comma and spaces, or "name:".
_SPACE_CUES = ("my name is", "my name's", "name is", "i am", "i'm", "this is", "call me", "spoke with", "spoke to",
               "talked to", "ask for", "speak to", "signed", "under", "mr", "mrs", "ms", "miss", "mx", "dr", "prof",
               "herr", "frau", "mme", "mlle", "sr", "sra", "sig", "signora", "dhr", "mevr")
_COMMA_CUES = ("regards", "thanks", "thank you", "cheers", "best", "sincerely", "yours")


def _either(words: tuple[str, ...], *, backwards: bool = False) -> str:
    return "|".join(re.escape(w[::-1] if backwards else w) for w in words)


_NAME_CUE_TEXT = rf"(?:\b(?:{_either(_SPACE_CUES)})\.?\s+|\b(?:{_either(_COMMA_CUES)}),\s+|\bname\s*:\s*)"
# Searched in the lower-cased text (4x faster than IGNORECASE); the ignore-case twin serves text whose
# lower-casing changes its length (a few non-ASCII letters), where positions would no longer line up.
_NAME_CUE = re.compile(_NAME_CUE_TEXT)
_NAME_CUE_ANY_CASE = re.compile(_NAME_CUE_TEXT, re.IGNORECASE)
_PARTICLE = r"(?:van|von|de|del|della|di|da|der|den|le|la|du|dos|das|ten|ter)"
_NAME_AFTER = re.compile(rf"{_CAP}(?:\s+(?:{_PARTICLE}\s+)*{_CAP}){{0,2}}")
# Capitalised words that follow a cue but are not names ("I'm Sorry", "Thanks Again").
_NOT_NAMES = frozenset([
    "i", "i'm", "i'd", "i'll", "i've", "im", "a", "an", "the", "my", "your", "our", "this", "that", "it", "he",
    "she", "we", "they", "you", "sorry", "happy", "glad", "fine", "good", "great", "sure", "not", "so", "very",
    "just", "still", "also", "looking", "trying", "going", "calling", "writing", "asking", "here", "there", "back",
    "new", "interested", "afraid", "ok", "okay", "yes", "no", "please", "hello", "hi", "hey", "thanks", "thank",
    "again", "all", "everyone", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "english", "french", "german", "spanish", "italian", "dutch", "american", "british",
])

_STREET_EN = (r"(?:street|st|road|mew|ground|grounds|boulevard|rd|avenue|ave|av|lane|ln|drive|dr|blvd|court|ct|"
              r"way|place|pl|"
              r"crescent|close|green|gardens?|square|sq|terrace|hill|park|row|walk|mews|parade|grove|rise|"
              r"junctions?|brooks?|ways|plaza|parkway|pkwy|circle|cir|trail|highway|hwy|expressway|route|"
              r"crossing|heights|landing|harbor|harbour|island|meadows?|ridge|valley|view|village|villages|"
              r"vista|ville|ports?|points?|pines|squares|streets|estates?|extensions?|falls|fields?|flats|"
              r"fords?|forest|forges?|glens?|greens|groves|haven|hills|hollow|inlet|keys?|knolls?|lakes?|lights?|"
              r"loaf|locks?|lodge|loop|manors?|mill|mills|mission|motorway|mount|mountains?|neck|orchard|oval|"
              r"overpass|pass|passage|path|pike|plains?|port|prairie|radial|ranch|rapids?|rest|river|roads|"
              r"shoals?|shores?|skyway|springs?|spur|stravenue|stream|summit|throughway|trace|track|"
              r"trafficway|tunnel|turnpike|union|unions|viaduct|views|wall|wells?|underpass|burgs?|bypass|"
              r"camp|canyon|cape|causeway|centers?|circles|cliffs?|club|common|commons|corners?|course|courts|"
              r"coves?|creek|crest|curve|dale|dam|divide|drives|ferry|freeway|garden|gateway|harbors|hills|"
              r"alley|anex|arcade|bayou|beach|bend|bluffs?|bottom|branch|bridge|brook|station|fort)")
# A street word written in lower case counts only when it cannot be prose ("20s rest", "2 way", "3 pass" are not).
_STREET_LOWER = r"(?:street|st|road|rd|avenue|ave|lane|boulevard|blvd|terrace|highway|hwy)"
_SUFFIXES = ("straße", "strasse", "str.", "weg", "allee", "gasse", "platz", "ring", "damm", "ufer", "chaussee", "steig",
             "pfad", "laan", "straat", "gracht", "plein", "singel", "kade", "dijk", "hof", "markt", "veld", "dreef",
             "pad", "baan", "steeg", "boulevard", "park", "plantsoen")  # the end of a street's one word, any case
_TYPES_BEFORE = ("Via", "Viale", "Piazza", "Piazzale", "Corso", "Largo", "Vicolo", "Strada", "Stretto", "Canale",
                 "Lungomare", "Galleria", "Rione", "Salita", "Borgo", "Contrada", "Rotonda", "Incrocio", "Calle",
                 "Avenida", "Paseo", "Plaza", "Camino", "Carrer", "Ronda", "Travesía", "Cañada", "Glorieta", "Pasaje",
                 "Rua", "Travessa", "Alameda", "Ulica", "ul.", "Gatan", "Vägen")  # a street type before its name
_STREET_WORD_NUMBER = re.compile(
    rf"\b(?:[A-ZÀ-Þ][\w'’\-]*(?i:{_either(_SUFFIXES)})|"
    rf"(?:{_either(_TYPES_BEFORE)})\s+(?:(?:de|del|della|di|da|la|las|los|do|dos)\s+)*{_CAP}(?:\s+{_CAP}){{0,3}})"
    r",?\s+(?:n\.?\s*)?\d{1,5}[A-Za-z]?(?:\s*[-/]\s*\d{1,5})?"
    r"(?:\s+(?:Apt\.|Piso|piso|Puerta|Esc\.|Piano|Interno|Scala)\s*\S+)*")
_NUMBER_STREET = re.compile(
    rf"(?<![\w.,])(?:(?:Apt\.?|Apartment|Suite|Flat|Unit|Studio|Level)\s+\w+,?\s+"
    rf"(?:\d{{1,6}}[A-Za-z]?(?:[-/]\d{{1,5}})?,?\s+)?|\d{{1,6}}[A-Za-z]?(?:[-/]\d{{1,5}})?,?\s+)"
    rf"(?:(?:{_CAP}|of|the|de|la)\s+){{0,4}}(?:(?=[A-Z])(?i:{_STREET_EN})|{_STREET_LOWER})\b"
    rf"(?:\s+(?:Apt\.?|Suite|Unit|Ste\.?)\s*\w+\.?)?")
_TYPES_AFTER = ("rue", "avenue", "av.", "boulevard", "bd", "chemin", "place", "impasse", "allée", "quai", "route",
                "cours", "passage", "square", "sentier", "voie")  # French street types, after the house number
_NUMBER_TYPE = re.compile(
    rf"(?<![\w.,])\d{{1,5}}(?:\s*(?:bis|ter))?,?\s+(?i:{_either(_TYPES_AFTER)})\s+(?:(?:de|du|des|la|le|l'|d')\s*)*"
    + _CAP + r"(?:[\s-]+" + _CAP + r"){0,3}")
# After a street: ", Town", ", 75001 Paris", ", NY 10001", "CP 12345": capitalised words and postcodes.
_ADDRESS_TAIL = re.compile(
    r"(?:\s*,?\s+(?:(?:\d{4,5}(?:[- ]?\d{3,4})?|[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2}|\d{4}\s?[A-Z]{2}|\d[A-Z]{2})"
    rf"(?:\s+{_CAP})*|(?:{_CAP}|\(?[A-Z]{{2,3}}\)?)(?:[\s-]+(?:{_CAP}|\([A-Z]{{2}}\)|sur|de|am|an|der|la|le|en|"
    rf"\d{{4,5}}|\d[A-Z]{{2}}))*))(?=[\s,.!?)]|$)")


_CAP_START = re.compile(r"[A-ZÀ-ÖØ-Þ]")  # what a name (``_CAP``) starts with

# Necessary conditions, each far cheaper than the search it guards (measured on USS turns with digits: the street
# searches 9.0 -> 3.8 µs, names 2.6 -> 1.1 µs a turn). Checked on ASCII text only, where lower-casing and
# ignore-case agree; other text takes every search. The reversed searches find "a digit, then backwards a
# street word's end" or "a capital, then backwards a cue" starting from the rare character instead of trying
# every position: a reversed regular expression matches the reversed text exactly where the original matches.
_CUE_BEFORE_CAPITAL = re.compile(  # in the reversed text
    rf"[A-Z](?:\s+\.?(?i:{_either(_SPACE_CUES, backwards=True)})|\s+,(?i:{_either(_COMMA_CUES, backwards=True)})"
    r"|\s*:\s*(?i:eman))(?!\w)")
_NUMBER_AFTER_SUFFIX = re.compile(rf"\d(?:\s*\.?n)?\s+,?(?:{_either(_SUFFIXES, backwards=True)})")  # reversed, lower
_TYPE_BEFORE_SPACE = re.compile(rf"(?:{_either(_TYPES_BEFORE)})\s")
_TYPE_AFTER_NUMBER = re.compile(rf"\d(?:\s*(?:bis|ter))?,?\s+(?:{_either(_TYPES_AFTER)})\s")  # lower-cased


def name_spans(text: str) -> list[tuple[int, int]]:
    if _CAP_START.search(text, 1) is None:  # a name follows a cue, so starts past the first character: none here
        return []  # (four in ten chat turns: the cue search costs 20x this check)
    if text.isascii() and _CUE_BEFORE_CAPITAL.search(text[::-1]) is None:
        return []  # no cue right before a capital: the cue search would find no name either
    spans = []
    lowered = text.lower()
    cues = _NAME_CUE.finditer(lowered) if len(lowered) == len(text) else _NAME_CUE_ANY_CASE.finditer(text)
    for cue in cues:
        match = _NAME_AFTER.match(text, cue.end())
        if match is None:
            continue
        words = match.group().split()
        while words and words[-1].lower() in _NOT_NAMES:
            words.pop()
        if not words or words[0].lower() in _NOT_NAMES:
            continue
        spans.append((match.start(), match.start() + len(" ".join(words))))
    return spans


def address_spans(text: str) -> list[tuple[int, int]]:
    patterns = [_NUMBER_STREET, _STREET_WORD_NUMBER, _NUMBER_TYPE]
    if text.isascii():
        lowered = text.lower()
        if _TYPE_BEFORE_SPACE.search(text) is None and _NUMBER_AFTER_SUFFIX.search(lowered[::-1]) is None:
            patterns.remove(_STREET_WORD_NUMBER)
        if _TYPE_AFTER_NUMBER.search(lowered) is None:
            patterns.remove(_NUMBER_TYPE)
    spans = []
    for pattern in patterns:
        for match in pattern.finditer(text):
            end = match.end()
            for _ in range(4):  # at most four more parts: town, postcode, state, country
                tail = _ADDRESS_TAIL.match(text, end)
                if tail is None or tail.end() == end:
                    break
                end = tail.end()
            spans.append((match.start(), end))
    return spans
