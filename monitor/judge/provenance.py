"""The evaluator's provenance on every verdict, and a log line and a count when any part of it changes.

:class:`Provenance` is built once per judge from its settings (endpoint, the mode's prompt templates, rubric,
mode, convmon's version); :meth:`Provenance.stamp` adds the model(s) the endpoint's responses named for one
conversation. Each verdict's evaluator is compared with the previous one, the first verdict of a process with
the last one recorded for the judge in the label store's database (:mod:`monitor.judge.sql_provenance`), so a
deploy that changes the prompt or the endpoint counts too. Each field that differs is logged once, at the verdict
that changed it, and counted in ``convmon_judge_provenance_changes_total{what}`` (``what`` in
:data:`monitor.contracts.evaluator.PROVENANCE_FIELDS`); a dated model version rolled out behind an unchanged
model name shows up as a ``model`` change. Workers that start at the same moment may each count one change.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from monitor import __version__
from monitor.contracts.errors import StoreError
from monitor.contracts.evaluator import PROVENANCE_FIELDS, Evaluator
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet
from monitor.judge.prompt import load_template

log = logging.getLogger(__name__)
DEFAULT_ENDPOINT = "https://api.openai.com/v1"  # the openai client's default base URL
# the templates each mode's calls are rendered from (the repair prompt follows an unusable answer)
TEMPLATES = {"spur": ("spur_estimation", "conversation", "repair"), "likert": ("likert", "conversation", "repair"),
             "logprobs": ("logprobs", "conversation")}
_SHOWN = 300


def endpoint_url(base_url: str | None) -> str:
    """The configured endpoint as scheme://host[:port]/path: credentials, query string and fragment dropped.

    >>> endpoint_url("https://user:key@llm.internal:8443/v1/?api-key=secret#x")
    'https://llm.internal:8443/v1'
    """
    if not base_url:
        return DEFAULT_ENDPOINT
    parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
    host = parts.hostname or "unknown"
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))[:_SHOWN]


def prompt_hash(prompts_dir: Path, mode: str, domain: str = "") -> str:
    """``sha256:<hex>`` over the names and text of the templates ``mode`` renders its prompts from, and the domain
    description filled into them (the rubric's text is the rubric version's)."""
    digest = hashlib.sha256(f"domain\0{domain}\0".encode())
    for name in TEMPLATES[mode]:
        digest.update(f"{name}\0{load_template(prompts_dir, name).template}\0".encode())
    return f"sha256:{digest.hexdigest()[:32]}"


class ProvenanceBook(Protocol):
    """Where the last evaluator of each judge is kept across restarts (:mod:`monitor.judge.sql_provenance`)."""

    def last(self, judge: str) -> Evaluator | None: ...

    def remember(self, judge: str, evaluator: Evaluator) -> None: ...


class Provenance:
    """Stamps verdicts with their evaluator and reports changes; one per judge (``judge``: its name)."""

    def __init__(self, metrics: Metrics, *, judge: str, endpoint: str, prompt: str, rubric: RubricSet, mode: str,
                 version: str = __version__, book: ProvenanceBook | None = None) -> None:
        self.metrics = metrics
        self.judge = judge
        self.endpoint = endpoint
        self.prompt = prompt
        self.rubric = rubric.key
        self.mode = mode
        self.version = version
        self.book = book
        self._last: Evaluator | None = None
        self._read = book is None  # the book is read once, at the first verdict
        self._lock = asyncio.Lock()
        for what in PROVENANCE_FIELDS:
            metrics.judge_provenance_changes.labels(what)

    async def stamp(self, models: Iterable[str]) -> Evaluator:
        """The evaluator of one verdict whose calls the endpoint answered as ``models``."""
        evaluator = Evaluator(model=",".join(sorted(set(models)))[:_SHOWN], endpoint=self.endpoint,
                              prompt=self.prompt, rubric=self.rubric, mode=self.mode, version=self.version)
        if evaluator == self._last:
            return evaluator
        async with self._lock:  # concurrent first verdicts: one reads the book, one change is reported
            if not self._read:
                self._last = await self._call(lambda book: book.last(self.judge))
                self._read = True
            last, self._last = self._last, evaluator
            if last == evaluator:
                return evaluator
            if last is not None:
                self._report(last, evaluator)
            await self._call(lambda book: book.remember(self.judge, evaluator))
        return evaluator

    async def _call(self, work: Callable[[ProvenanceBook], Evaluator | None]) -> Evaluator | None:
        """A book call off the event loop; an unreachable book costs the comparison with other runs, no verdict."""
        if self.book is None:
            return None
        book = self.book
        try:
            return await asyncio.to_thread(work, book)
        except StoreError as exc:
            log.warning("judge provenance not compared with earlier runs: %s", exc)
            return None

    def _report(self, last: Evaluator, evaluator: Evaluator) -> None:
        for what in PROVENANCE_FIELDS:
            before, after = getattr(last, what), getattr(evaluator, what)
            if before != after:
                self.metrics.judge_provenance_changes.labels(what).inc()
                log.warning("judge %s provenance changed: %s %r -> %r (compare verdict rates across the change "
                            "with care)", self.judge, what, before, after)
