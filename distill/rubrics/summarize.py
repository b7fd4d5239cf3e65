"""SPUR rubric summarization (Appendix A.2): extracted reasons in mini-batches become rubric items.

SPUR mode (:func:`summarize_iterative`): batches of ``batch_size`` reasons (default 100); the
rubric written for one batch is appended to the examples of the next, so the last answer
summarizes all of them; at most ``n`` items (the template's "fewer than n+1"). RUBICON mode
(:func:`summarize_pool`): every batch is summarized on its own and its items join a growing pool
(de-duplicated by the caller), so rare patterns are not squeezed out by a fixed n.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from distill.rubrics.cache import CachingClient
from distill.rubrics.extract import FEELING, Label, Pattern, context_message
from monitor.contracts.rubric_set import RubricItem
from monitor.contracts.sections import RubricSettings
from monitor.judge.prompt import render

log = logging.getLogger(__name__)
SUMMARIZATION_MAX_TOKENS = 1200
_RUBRIC = re.compile(r"<Rubric>(.*?)(?:</Rubric>|$)", re.S | re.I)
_NUMBERED = re.compile(r"^\s*\d+[.)]\s*(.+?)\s*$")
_SLUG = re.compile(r"[^a-z0-9]+")
POLARITY: dict[Label, str] = {"SAT": "sat", "DSAT": "dsat"}


def parse_rubric(text: str) -> list[str]:
    """The numbered lines of the ``<Rubric>`` block (of the whole answer when the tags are missing).

    >>> parse_rubric("<Rubric>\\n1. Gratitude: thanks\\n2. [Praise: says great]\\n</Rubric>")
    ['Gratitude: thanks', 'Praise: says great']
    """
    match = _RUBRIC.search(text)
    body = match.group(1) if match else text
    lines = []
    for line in body.splitlines():
        numbered = _NUMBERED.match(line)
        if numbered:
            entry = numbered.group(1).strip()
            if entry.startswith("[") and entry.endswith("]"):
                entry = entry[1:-1].strip()
            if entry and entry not in ("...", "…"):
                lines.append(entry)
    return lines


def split_entry(entry: str) -> tuple[str, str]:
    """``"Name: description"`` into its parts; entries without a short name get one from their words.

    >>> split_entry("**Gratitude**: The user thanks the agent.")
    ('Gratitude', 'The user thanks the agent.')
    >>> split_entry("The user repeats the same request several times")
    ('The user repeats the same request', 'The user repeats the same request several times')
    """
    entry = entry.replace("**", "").strip()
    name, sep, description = entry.partition(":")
    if sep and name.strip() and description.strip() and len(name.split()) <= 8:
        return name.strip(), description.strip()
    words = entry.rstrip(".").split()
    return " ".join(words[:6]) or entry, entry


def to_items(entries: list[str], label: Label, *, taken: set[str] | None = None) -> list[RubricItem]:
    """Rubric items with ids ``<polarity>.<slug of the name>``, unique against ``taken``."""
    taken = set() if taken is None else taken
    polarity = POLARITY[label]
    items = []
    for entry in entries:
        name, description = split_entry(entry)
        if not name.strip() or not description.strip():
            continue  # nothing left of the entry once markdown is stripped
        slug = _SLUG.sub("_", name.lower()).strip("_")[:40].rstrip("_") or "item"
        slug = slug if slug[0].isalpha() else f"i_{slug}"
        item_id, k = f"{polarity}.{slug}", 2
        while item_id in taken:
            item_id, k = f"{polarity}.{slug}_{k}", k + 1
        taken.add(item_id)
        items.append(RubricItem(id=item_id, name=name, polarity=polarity, description=description))
    return items


def summarization_messages(rubrics: RubricSettings, examples: list[str], label: Label, n: int) -> list[dict[str, str]]:
    feeling, noun, _ = FEELING[label]
    text = "\n".join(f"- {e}" for e in examples)
    user = render(rubrics.prompts_dir, "spur_summarization", feeling=feeling, feeling_noun=noun,
                  num_rubric=n + 1, examples=text)
    return [context_message(rubrics), {"role": "user", "content": user}]


def batches(patterns: list[Pattern], label: Label, batch_size: int, seed: int) -> list[list[str]]:
    """This label's reasons, shuffled with a fixed seed, in mini-batches.

    Repeated reasons are kept: how often a pattern recurs is what the summarizer should weigh.
    """
    texts = sorted(p.text for p in patterns if p.label == label)
    random.Random(seed).shuffle(texts)
    return [texts[i : i + batch_size] for i in range(0, len(texts), batch_size)]


@dataclass
class SummaryResult:
    items: list[RubricItem]
    calls: int = 0  # batches asked
    failed_batches: int = 0  # dropped: no numbered rubric in the answer
    cut_off: int = 0  # dropped: still cut off at the output limit after a retry with a larger one
    history: list[int] = field(default_factory=list)  # items after each batch


async def _summarize(llm: CachingClient, messages: list[dict[str, str]], label: Label, n: int, model: str,
                     result: SummaryResult) -> list[str]:
    """One batch's rubric entries; [] (counted as dropped) when the answer is cut off or has none."""
    completion = await llm.complete_whole(messages, model=model, max_tokens=SUMMARIZATION_MAX_TOKENS)
    result.calls += 1
    if completion is None:
        result.cut_off += 1
        return []
    entries = parse_rubric(completion.text)[:n]
    if not entries:
        result.failed_batches += 1
        log.warning("summarization of a %s batch gave no numbered rubric", label)
    return entries


async def summarize_iterative(
    llm: CachingClient, rubrics: RubricSettings, patterns: list[Pattern], label: Label, *, model: str,
    batch_size: int = 100, n: int = 10, seed: int = 0, on_done: Callable[[], None] | None = None,
) -> SummaryResult:
    """SPUR: the previous rubric joins the next batch; the last rubric (at most ``n`` items) wins."""
    result = SummaryResult(items=[])
    previous: list[str] = []
    for batch in batches(patterns, label, batch_size, seed):
        entries = await _summarize(llm, summarization_messages(rubrics, batch + previous, label, n), label, n,
                                   model, result)
        previous = entries or previous  # a dropped batch keeps the previous rubric
        result.history.append(len(previous))
        if on_done is not None:
            on_done()
    result.items = to_items(previous, label)
    return result


async def summarize_pool(
    llm: CachingClient, rubrics: RubricSettings, patterns: list[Pattern], label: Label, *, model: str,
    batch_size: int = 100, n: int = 10, seed: int = 0, on_done: Callable[[], None] | None = None,
) -> SummaryResult:
    """RUBICON: each batch summarized independently; every item kept (de-duplicate afterwards)."""
    result = SummaryResult(items=[])
    taken: set[str] = set()
    for batch in batches(patterns, label, batch_size, seed):
        entries = await _summarize(llm, summarization_messages(rubrics, batch, label, n), label, n, model, result)
        result.items.extend(to_items(entries, label, taken=taken))
        result.history.append(len(result.items))
        if on_done is not None:
            on_done()
    return result
