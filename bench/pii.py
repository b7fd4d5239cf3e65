"""``convmon bench pii``: per-type recall of the redactor on the committed PII set, and what it removes from
conversations that hold no personal data (USS), with its CPU cost per turn and per conversation.

Recall: a labelled span counts as found only when every letter and digit of it is inside a redaction
(a phone whose extension survives is a miss). Reported per type (and per phone variant: with a country
code or national) on the ``tune`` split the rules were tuned on and on the ``heldout`` split they never saw.
False positives: USS dialogues are crowd-sourced bookings and preferences (venue phone numbers and
addresses, fictional names) with no one's personal data, so every token the redactor touches there is
counted as a false positive: an upper bound. Tokens are whitespace-separated words. ``--scoring`` adds the
served distilled recipe's AUC on USS with raw and with redacted text (:mod:`bench.pii_scoring`).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from monitor.contracts.settings import REPO_ROOT
from monitor.judge.redact import Redactor

PII_SET = REPO_ROOT / "tests" / "data" / "pii" / "pii_spans.jsonl"
_TOKEN = re.compile(r"\S+")
EXAMPLES = 8


def found(text: str, start: int, end: int, spans: list[tuple[int, int, str]]) -> bool:
    """Every letter and digit of ``text[start:end]`` lies inside one of ``spans``."""
    covered = [False] * (end - start)
    for s, e, _ in spans:
        for i in range(max(s, start), min(e, end)):
            covered[i - start] = True
    return all(c or not text[start + i].isalnum() for i, c in enumerate(covered))


def recall(redactor: Redactor, path: Path = PII_SET) -> dict[str, Any]:
    hits: dict[tuple[str, str], list[bool]] = defaultdict(list)
    misses: dict[str, list[str]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        ok = found(record["text"], record["start"], record["end"], redactor.spans(record["text"]))
        kinds = [record["type"]] + ([f"phone:{record['variant']}"] if record["type"] == "phone" else [])
        for kind in kinds:
            hits[(record["split"], kind)].append(ok)
        if not ok and record["split"] == "tune" and len(misses[record["type"]]) < EXAMPLES:
            misses[record["type"]].append(record["text"][record["start"]:record["end"]])
    out: dict[str, Any] = {}
    for (split, kind), results in sorted(hits.items()):
        out.setdefault(split, {})[kind] = {"recall": sum(results) / len(results), "spans": len(results)}
    out["spans"] = sum(len(v) for (split, _), v in hits.items() if ":" not in _)
    out["tune_misses"] = dict(misses)
    return out


def uss_false_positives(redactor: Redactor, data: Path, files: list[str]) -> dict[str, Any]:
    from distill.datasets.uss import load_uss

    tokens = redacted = turns = conversations = 0
    by_label: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    seconds = 0.0
    for name in files:
        for dialogue in load_uss(data / "uss" / f"{name}.txt"):
            conversations += 1
            for turn in dialogue.turns:
                if not turn.text:
                    continue
                turns += 1
                started = time.process_time()  # CPU time: the machine may be shared
                spans = redactor.spans(turn.text)
                seconds += time.process_time() - started
                words = [m.span() for m in _TOKEN.finditer(turn.text)]
                tokens += len(words)
                for s, e, label in spans:
                    n = sum(1 for ws, we in words if ws < e and we > s)
                    redacted += n
                    by_label[label] += n
                    if len(examples[label]) < EXAMPLES:
                        examples[label].append(turn.text[s:e])
    return {"files": files, "conversations": conversations, "turns": turns, "tokens": tokens,
            "tokens_redacted": redacted, "false_positive_rate": redacted / max(tokens, 1),
            "by_label": dict(by_label), "examples": dict(examples),
            "cpu_us_per_turn": 1e6 * seconds / max(turns, 1),
            "cpu_us_per_conversation": 1e6 * seconds / max(conversations, 1)}


def run(data: Path, files: list[str], regions: list[str] | None = None, *, scoring: bool = False,
        scoring_splits: int = 3) -> dict[str, Any]:
    redactor = Redactor() if regions is None else Redactor(phone_regions=regions)
    out = {"bench": "pii", "phone_regions": redactor.phone_regions, "set": str(PII_SET.relative_to(REPO_ROOT)),
           "recall": recall(redactor), "uss": uss_false_positives(redactor, data, files)}
    if scoring:
        from bench.pii_scoring import scoring_effect

        out["scoring"] = scoring_effect(data, files, splits=scoring_splits, redactor=redactor)
    return out
