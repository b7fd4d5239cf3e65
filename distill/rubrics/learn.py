"""Rubric learning: labelled conversations in, a versioned rubric set out (SPUR or RUBICON).

    extract (A.1, one call per SAT/DSAT conversation) -> reasons
    summarize (A.2, mini-batches)                      -> SPUR: <= n items per polarity
                                                       -> RUBICON: a growing pool
    deduplicate (embedding cosine)                     -> distinct items
    RUBICON only: score the pool once on the training conversations, greedy selection

Every LLM call goes through :class:`~distill.rubrics.cache.CachingClient`, so a rerun replays
finished calls from ``<data_dir>/rubric_cache`` for free. ``plan_calls`` is the dry run.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from sklearn.base import BaseEstimator

from distill.rubrics.cache import CachingClient
from distill.rubrics.dedup import deduplicate
from distill.rubrics.extract import EXTRACTION_MAX_TOKENS, Labeled, extract_patterns, extraction_messages
from distill.rubrics.measure import score_matrix, signs_of
from distill.rubrics.rubicon import select
from distill.rubrics.summarize import SUMMARIZATION_MAX_TOKENS, summarize_iterative, summarize_pool
from monitor.contracts.errors import ConfigError
from monitor.contracts.rubric_set import RubricItem, RubricSet
from monitor.contracts.sections import JudgeSettings, RubricSettings
from monitor.judge.completion import estimate_tokens, price_for
from monitor.judge.redact import Redactor

Track = Callable[[str, int], Callable[[], None]]
_PROMPT_TOKENS_PER_REASON = 25
_PROMPT_TOKENS_PER_ITEM = 45
_OUTPUT_TOKENS_PER_ITEM = {"likert": 10, "spur": 16}


@dataclass(frozen=True)
class LearnOptions:
    """Everything that shapes the result; recorded verbatim in the set's provenance."""

    method: Literal["spur", "rubicon"] = "spur"
    model: str = "gpt-4o-mini"
    max_reasons: int = 3
    batch_size: int = 100
    n: int = 10
    dedup_threshold: float = 0.85
    embedder: str = "hashing"
    score_mode: Literal["likert", "spur"] = "likert"
    max_pool: int = 40  # per polarity, RUBICON
    sat_budget: int = 10
    dsat_budget: int = 10
    folds: int = 5
    seed: int = 0


@dataclass(frozen=True)
class Drops:
    """The answers of one stage that were not used, by reason (a cut-off answer is never used)."""

    stage: str
    answers: int
    reasons: dict[str, int]

    @property
    def dropped(self) -> int:
        return sum(self.reasons.values())

    @property
    def share(self) -> float:
        return self.dropped / self.answers if self.answers else 0.0

    def __str__(self) -> str:
        why = sorted(((n, reason) for reason, n in self.reasons.items() if n), reverse=True)
        shown = "; ".join(f"{n}: {reason}" for n, reason in why[:3]) + ("; ..." if len(why) > 3 else "")
        return f"{self.stage}: {self.dropped} of {self.answers} answers dropped" + (f" ({shown})" if shown else "")


def too_little(drops: list[Drops], max_dropped: float) -> list[Drops]:
    """The stages that dropped more than ``max_dropped`` of their answers: the result rests on too little."""
    return [d for d in drops if d.share > max_dropped + 1e-12]


def _all_failed(drops: Drops) -> ConfigError:
    return ConfigError(f"{drops.stage}: every one of the {drops.answers} answers was unusable, so nothing was "
                       f"learned; {drops}")


@dataclass
class LearnResult:
    rubric: RubricSet
    stats: dict[str, Any] = field(default_factory=dict)
    scores: np.ndarray | None = None  # RUBICON: the pool's score matrix on the training conversations
    drops: list[Drops] = field(default_factory=list)  # per stage, for the run's summary


def _noop(label: str, total: int) -> Callable[[], None]:
    return lambda: None


async def _pool(llm: CachingClient, rubrics: RubricSettings, patterns: list[Any], opts: LearnOptions,
                embedder: BaseEstimator, track: Track) -> tuple[list[RubricItem], dict[str, Any]]:
    """Summarize and de-duplicate both polarities: SPUR's n items, or RUBICON's capped pool."""
    items: list[RubricItem] = []
    stats: dict[str, Any] = {"summarization_calls": 0, "failed_batches": 0, "cut_off_batches": 0, "duplicates": []}
    run = summarize_iterative if opts.method == "spur" else summarize_pool
    for label in ("SAT", "DSAT"):
        count = sum(p.label == label for p in patterns)
        done = track(f"summarize {label}", max(1, math.ceil(count / opts.batch_size)))
        result = await run(llm, rubrics, patterns, label, model=opts.model, batch_size=opts.batch_size, n=opts.n,
                           seed=opts.seed, on_done=done)
        kept, dropped = deduplicate(result.items, embedder, threshold=opts.dedup_threshold)
        items += kept if opts.method == "spur" else kept[: opts.max_pool]
        stats["summarization_calls"] += result.calls
        stats["failed_batches"] += result.failed_batches
        stats["cut_off_batches"] += result.cut_off
        stats["duplicates"] += [asdict(d) for d in dropped]
    return items, stats


async def learn_rubric_set(
    llm: CachingClient, judge: JudgeSettings, rubrics: RubricSettings, data: list[Labeled], opts: LearnOptions, *,
    embedder: BaseEstimator,
    set_id: str, data_info: dict[str, Any], track: Track = _noop,
) -> LearnResult:
    """The whole pipeline; raises ``ConfigError`` when nothing usable comes out."""
    extraction = await extract_patterns(llm, judge, rubrics, data, model=opts.model, max_reasons=opts.max_reasons,
                                        on_done=track("extract reasons", len(data)))
    drops = [Drops("extraction", extraction.answers, {
        f"cut off at the output limit even with {2 * EXTRACTION_MAX_TOKENS} tokens": extraction.cut_off,
        "no <REASONS> block": extraction.unparseable})]
    if extraction.answers and drops[0].dropped == extraction.answers:
        raise _all_failed(drops[0])
    if not extraction.patterns:
        raise ConfigError(f"extraction found no reasons in {len(data)} conversations ({extraction.none} NONE, "
                          f"{extraction.unparseable} unparseable answers, {extraction.cut_off} cut off)")
    items, stats = await _pool(llm, rubrics, extraction.patterns, opts, embedder, track)
    drops.append(Drops("summarization", stats["summarization_calls"], {
        f"cut off at the output limit even with {2 * SUMMARIZATION_MAX_TOKENS} tokens": stats["cut_off_batches"],
        "no numbered <Rubric> list": stats["failed_batches"]}))
    stats.update(reasons=len(extraction.patterns), extraction_none=extraction.none,
                 extraction_unparseable=extraction.unparseable, extraction_cut_off=extraction.cut_off, pool=len(items))
    if drops[1].answers and drops[1].dropped == drops[1].answers:
        raise _all_failed(drops[1])
    if not items:
        raise ConfigError("summarization produced no rubric items (see the warnings above)")
    result = LearnResult(rubric=None)  # type: ignore[arg-type]
    selection: dict[str, Any] = {}
    if opts.method == "rubicon":
        conversations = [x.conversation for x in data]
        failures: Counter[str] = Counter()
        scores = await score_matrix(llm, judge, rubrics, items, conversations, mode=opts.score_mode, model=opts.model,
                                    on_done=track("score pool", len(conversations)), failures=failures)
        ok = ~np.isnan(scores).any(axis=1)
        drops.append(Drops("pool scoring", len(conversations), dict(failures)))
        if conversations and not ok.any():
            raise _all_failed(drops[-1])
        y = np.array([1 if x.label == "SAT" else 0 for x in data])
        try:
            chosen = select(scores[ok], signs_of(items), y[ok], sat_budget=opts.sat_budget,
                            dsat_budget=opts.dsat_budget, folds=opts.folds, seed=opts.seed)
        except ConfigError as exc:
            raise ConfigError(f"{exc}; {drops[-1]}" if drops[-1].dropped else str(exc)) from exc
        selection = {"alpha": chosen.alpha, "tau": chosen.tau, "threshold": chosen.threshold,
                     "threshold_r": chosen.threshold_r, "separation": chosen.separation,
                     "sharpness": chosen.sharpness, "cv_balanced_accuracy": {str(a): v for a, v in chosen.cv.items()},
                     "pool_ids": [i.id for i in items], "scored_conversations": int(ok.sum())}
        result.scores = scores
        items = [items[j] for j in chosen.selected]
    stats["llm"] = llm.stats.as_dict()
    stats["dropped"] = {d.stage: {"answers": d.answers, **d.reasons} for d in drops}
    result.rubric = build_set(set_id, items, opts, data_info, selection, stats)
    result.stats = stats
    result.drops = drops
    return result


def build_set(set_id: str, items: list[RubricItem], opts: LearnOptions, data_info: dict[str, Any],
              selection: dict[str, Any], stats: dict[str, Any]) -> RubricSet:
    """A RubricSet whose version is the date plus a hash of its items and the options."""
    ordered = [i for p in ("sat", "dsat") for i in items if i.polarity == p]
    digest = hashlib.sha256(json.dumps([[i.model_dump() for i in ordered], asdict(opts)], sort_keys=True).encode())
    now = datetime.now(UTC)
    provenance: dict[str, Any] = {
        "method": opts.method, "data": data_info, "model": opts.model, "created": now.isoformat(timespec="seconds"),
        "parameters": asdict(opts), "stats": {k: v for k, v in stats.items() if k != "duplicates"},
        "duplicates_dropped": stats.get("duplicates", []),
    }
    if selection:
        provenance["selection"] = selection
    return RubricSet(id=set_id, version=f"{now:%Y%m%d}-{digest.hexdigest()[:8]}",
                     name=f"Learned rubric ({opts.method})",
                     description=f"Learned by convmon rubrics learn ({opts.method}) from {data_info.get('file')}",
                     provenance=provenance, items=ordered)


@dataclass(frozen=True)
class PlanRow:
    stage: str
    calls: int
    cached: int
    prompt_tokens: int
    output_tokens: int
    cost_usd: float | None


def _cost(judge: JudgeSettings, model: str, prompt: int, output: int) -> float | None:
    price = price_for(model, judge.judge_prices)
    return None if price is None else (prompt * price[0] + output * price[1]) / 1_000_000


def plan_calls(judge: JudgeSettings, rubrics: RubricSettings, llm: CachingClient, data: list[Labeled],
               opts: LearnOptions) -> list[PlanRow]:
    """Calls and cost before running: extraction exactly, later stages as upper bounds."""
    redactor = Redactor.from_settings(judge)
    rows, cached, prompt, conv_tokens = [], 0, 0, 0
    for item in data:
        messages = extraction_messages(judge, rubrics, item, redactor, max_reasons=opts.max_reasons)
        cached += llm.key(messages, model=opts.model, max_tokens=EXTRACTION_MAX_TOKENS) in llm.cache
        prompt += estimate_tokens(messages)
        conv_tokens += estimate_tokens([{"content": messages[-1]["content"]}])
    out = len(data) * EXTRACTION_MAX_TOKENS // 2
    rows.append(PlanRow("extraction", len(data), cached, prompt, out, _cost(judge, opts.model, prompt, out)))
    per_label = [sum(x.label == label for x in data) for label in ("SAT", "DSAT")]
    calls = sum(math.ceil(opts.max_reasons * count / opts.batch_size) for count in per_label)
    prompt = calls * (opts.batch_size * _PROMPT_TOKENS_PER_REASON + 400)
    out = calls * SUMMARIZATION_MAX_TOKENS // 2
    rows.append(PlanRow("summarization (at most)", calls, 0, prompt, out, _cost(judge, opts.model, prompt, out)))
    if opts.method == "rubicon":
        pool = 2 * opts.max_pool
        per_conv = math.ceil(pool / 10) if opts.score_mode == "likert" else 1
        calls = len(data) * per_conv
        prompt = calls * 400 + conv_tokens * per_conv + len(data) * pool * _PROMPT_TOKENS_PER_ITEM
        out = len(data) * pool * _OUTPUT_TOKENS_PER_ITEM[opts.score_mode]
        rows.append(PlanRow("pool scoring (at most)", calls, 0, prompt, out, _cost(judge, opts.model, prompt, out)))
    return rows


__all__ = ["Drops", "LearnOptions", "LearnResult", "PlanRow", "build_set", "learn_rubric_set", "plan_calls",
           "too_little"]
