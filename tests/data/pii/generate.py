"""Generate the labelled PII test set: Faker's locales, independent of convmon's redaction rules.

Run once and commit the output; the set is frozen before the rules are tuned (re-running with the same
seed and Faker version gives the same file). One span per sentence, in varied carrier sentences, some with
a cue ("my number is") and some without. Every fifth record of each type is held out (``split: heldout``):
rules are tuned on ``tune`` only, and both are reported (``convmon bench pii``).

    .venv/bin/python tests/data/pii/generate.py > tests/data/pii/pii_spans.jsonl
"""

from __future__ import annotations

import json
import random
import sys

from faker import Faker

SEED = 32
PHONE_LOCALES = ["en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pt_BR", "en_IN", "ja_JP",
                 "en_AU", "pl_PL", "sv_SE", "en_CA"]
CALLING_CODE = {"en_US": "1", "en_GB": "44", "de_DE": "49", "fr_FR": "33", "es_ES": "34", "it_IT": "39",
                "nl_NL": "31", "pt_BR": "55", "en_IN": "91", "ja_JP": "81", "en_AU": "61", "pl_PL": "48",
                "sv_SE": "46", "en_CA": "1"}
NAME_LOCALES = ["en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pt_BR"]
ADDRESS_LOCALES = ["en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "en_AU"]

TEMPLATES = {
    "email": ["my email is {}", "send the invoice to {} please", "{} is the address I used to sign up",
              "I can't log in with {}, can you check?", "cc {} on the ticket", "Contact: {}",
              "it keeps bouncing back from {} for some reason", "why was {} unsubscribed?"],
    "phone": ["call me on {}", "my number is {}", "you can reach me at {} after 6", "{} is my mobile",
              "the courier tried {} twice", "Phone: {}", "text {} when it ships", "I changed my phone to {} last week"],
    "card": ["my card number is {}", "charge it to {}", "{} was declined again", "Card: {}",
             "the payment with {} failed", "can you refund to {}?"],
    "iban": ["my IBAN is {}", "please transfer it to {}", "IBAN: {}", "the refund should go to {}",
             "I updated my bank account to {}", "{} is the account for the direct debit"],
    "ip": ["my IP is {}", "the login came from {}", "block {} please", "server at {} is down",
           "I'm connecting from {} and it times out", "whitelist {}"],
    "national_id": ["my SSN is {}", "{} is my social security number", "National Insurance number: {}",
                    "my NI number is {}", "here it is: {}", "the form asks for {}, is that safe?"],
    "address": ["I live at {}", "ship it to {}", "my address is {}", "the package went to {} instead",
                "{} is my billing address", "deliver to {} tomorrow", "we moved to {} last month"],
    "name": ["my name is {}", "this is {} speaking", "please forward this to {}", "{} told me to ask you",
             "I spoke with {} yesterday and nothing happened", "the account is under {}",
             "Regards, {}", "can {} pick it up instead?", "thanks, {}!", "Hi, I'm {}"],
}


def with_country_code(number: str) -> bool:
    return number.lstrip("(").startswith(("+", "00")) or number.startswith("1 (")


def phones(fake: dict[str, Faker], rng: random.Random) -> list[tuple[str, str, str]]:
    """Per locale 7 numbers with a country code and 7 without, as Faker writes them; a locale whose
    Faker provider never writes one kind gets it as ``+CC`` and the national number without its trunk 0."""
    out = []
    for locale in PHONE_LOCALES:
        kinds: dict[bool, list[str]] = {True: [], False: []}
        for _ in range(400):
            number = fake[locale].phone_number()
            kind = with_country_code(number)
            if len(kinds[kind]) < 7:
                kinds[kind].append(number)
        while len(kinds[True]) < 7:
            national = kinds[False][len(kinds[True]) % len(kinds[False])]
            kinds[True].append(f"+{CALLING_CODE[locale]} {national.removeprefix('0')}")
        while len(kinds[False]) < 7:
            kinds[False].append(fake[locale].phone_number().split(" ", 1)[-1])
        out += [(locale, n, "with_cc") for n in kinds[True]] + [(locale, n, "national") for n in kinds[False]]
    return out


def grouped(value: str, rng: random.Random) -> str:
    """Cards and IBANs as people write them: compact, or in groups of four (spaces or dashes)."""
    style = rng.choice(["compact", "space", "dash"]) if value[:2].isdigit() else rng.choice(["compact", "space"])
    if style == "compact":
        return value
    return ("-" if style == "dash" else " ").join(value[i:i + 4] for i in range(0, len(value), 4))


def main() -> None:
    rng = random.Random(SEED)
    Faker.seed(SEED)
    locales = sorted(set(PHONE_LOCALES + NAME_LOCALES + ADDRESS_LOCALES))
    fake = {loc: Faker(loc) for loc in locales}
    values: list[tuple[str, str, str, str]] = []  # (type, locale, value, variant)
    for _ in range(80):
        loc = rng.choice(NAME_LOCALES)
        values.append(("email", loc, rng.choice([fake[loc].email, fake[loc].free_email, fake[loc].company_email])(),
                       ""))
    values += [("phone", loc, n, kind) for loc, n, kind in phones(fake, rng)]
    for _ in range(60):
        values.append(("card", "en_US", grouped(fake["en_US"].credit_card_number(), rng), ""))
    for _ in range(60):
        loc = rng.choice(["de_DE", "fr_FR", "en_GB", "nl_NL", "es_ES", "it_IT"])
        values.append(("iban", loc, grouped(fake[loc].iban(), rng), ""))
    for _ in range(35):
        values.append(("ip", "", fake["en_US"].ipv4(), "ipv4"))
        values.append(("ip", "", fake["en_US"].ipv6(), "ipv6"))
    for _ in range(40):
        values.append(("national_id", "en_US", fake["en_US"].ssn(), "us_ssn"))
        values.append(("national_id", "en_GB", fake["en_GB"].ssn(), "uk_ni"))
    for _ in range(70):
        loc = rng.choice(ADDRESS_LOCALES)
        address = fake[loc].street_address() if rng.random() < 0.6 else fake[loc].address()
        values.append(("address", loc, address.replace("\n", ", "), ""))
    for _ in range(80):
        loc = rng.choice(NAME_LOCALES)
        values.append(("name", loc, rng.choice([fake[loc].name, fake[loc].first_name, fake[loc].last_name,
                                                lambda f=fake[loc]: f"{f.first_name()} {f.last_name()}"])(), ""))
    seen: dict[str, int] = {}
    for n, (kind, locale, value, variant) in enumerate(values):
        template = rng.choice(TEMPLATES[kind])
        start = template.index("{}")
        index = seen[kind] = seen.get(kind, -1) + 1
        record = {"id": n, "text": template.format(value), "type": kind, "locale": locale, "variant": variant,
                  "start": start, "end": start + len(value), "split": "heldout" if index % 5 == 4 else "tune"}
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
