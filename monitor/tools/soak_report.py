"""The soak's samples, memory verdict and report (JSON + PNG), apart from the run itself (``soak.py``).

Memory is judged on the worker's live heap when it exports one (``convmon_process_heap_allocated_bytes``,
runtime/allocator.py), else on RSS. RSS also counts freed pages the allocator keeps, which move in one-off
steps of 10-22 MB even on jemalloc and hid an injected 1.5 MB/min leak in 10-minute runs; the live heap moves
only with what the program holds (docs/reliability.md, "Soak"). RSS stays reported, plotted and judged
(``rss_bounded``), for information.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from monitor.contracts.settings import Settings

SLOPE_LIMIT_MB_PER_MIN = 1.0  # a leak of 1 MB/min is 1.4 GB a day: the soak must see it
MIN_MEASURED_S = 120.0  # the slope needs at least this much of the run after warm-up
# The heap rises for a minute or two and drops when the interpreter collects its cyclic garbage (3-10 MB, every
# 90-150 s in the engine's soaks): a floor over a longer span is what the worker holds.
FLOOR_SPAN_S = 180.0


@dataclass(frozen=True)
class Sample:
    t: float  # seconds since the load started
    produced: int  # conversations sent by the load generator
    finished: float  # conversations the sessionizer finished
    distilled: float  # distilled score records exported
    llm: float  # judge score records exported
    lag: float  # messages behind the log end, summed over the worker's input topics
    rss_mb: float
    load1: float = 0.0  # the machine's 1-minute load average: other work's backlog moves memory too
    heap_mb: float | None = None  # live malloc heap (None: the worker's allocator exports none)
    py_blocks: float | None = None  # the interpreter's allocated blocks (pymalloc's small objects, not in heap_mb)
    anon_mb: float | None = None  # anonymous resident memory: the heap and pymalloc's arenas (heap_mb misses those)


def warmup_for(retention_s: float | None, *, idle_timeout_s: float = 10.0, margin_s: float = 60.0) -> float:
    """When the state a soak's windows hold stops growing: the longest window (tombstones ``closed_retention_s``,
    dedup marks ``dedup_window_s``, the revisions ledger ``reopen_window_s`` + ``closed_retention_s``; the
    settings' defaults when ``retention_s`` is None, else ``retention_s`` each), plus the idle timeout (a
    conversation closes that long after its last event) and a margin for the first model loads."""
    if retention_s is None:
        defaults: dict[str, float] = {name: float(Settings.model_fields[name].default)
                                      for name in ("closed_retention_s", "dedup_window_s", "reopen_window_s")}
        windows = max(defaults["dedup_window_s"], defaults["reopen_window_s"] + defaults["closed_retention_s"])
    else:
        windows = 2 * retention_s  # the ledger: the reopen window, then the tombstone's
    return windows + idle_timeout_s + margin_s


def theil_sen(samples: list[Sample], value: Callable[[Sample], float], *, min_gap_s: float = 60.0) -> float:
    """Growth of ``value`` per minute: the median slope over every pair of samples at least ``min_gap_s`` apart
    (Theil-Sen). A steady leak moves every pair; one-off steps (a new model beside the old one, a bigger batch)
    move only the pairs that straddle them, so they cannot decide alone."""
    slopes = sorted(60.0 * (value(b) - value(a)) / (b.t - a.t)
                    for i, a in enumerate(samples) for b in samples[i + 1:] if b.t - a.t >= min_gap_s)
    if not slopes:
        return 0.0
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def windowed_slope(samples: list[Sample], value: Callable[[Sample], float], *, window_s: float = 60.0) -> float:
    """Growth of ``value`` per minute: the median over every sample of the slope to the first sample at least
    ``window_s`` later. A steady leak moves every window; a one-off step moves only the windows that hold it
    (six of the 35 one-minute windows of a 7-minute stretch sampled every 10 s) however late it comes, where it
    moves about half the pairs of ``theil_sen`` when it lands mid-run. The heap's verdict: in the 10-minute soaks
    it still rose in steps of 1-6 MB after the warm-up."""
    slopes = []
    for i, a in enumerate(samples):
        b = next((b for b in samples[i + 1:] if b.t - a.t >= window_s), None)
        if b is not None:
            slopes.append(60.0 * (value(b) - value(a)) / (b.t - a.t))
    if not slopes:
        return 0.0
    slopes.sort()
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def floor(samples: list[Sample], value: Callable[[Sample], float], *,
          span_s: float = FLOOR_SPAN_S) -> list[Sample]:
    """Each sample with ``span_s`` of run after it, its heap set to the lowest ``value`` in that span. Garbage
    awaiting collection moves the peaks, and so does a model held beside the one replacing it for a moment; a leak
    raises the floor. In the engine's first soak with a full first model the heap's one-minute slopes read
    +1.24 MB/min (most minutes of a rise-and-collect cycle rise) where its floor's Theil-Sen slope read +0.02;
    a 1 MB/min leak under such a cycle reads +0.98, 1.5 MB/min +1.5 (tests/tools/test_soak_report.py)."""
    out = []
    for i, a in enumerate(samples):
        if samples[-1].t - a.t < span_s:
            break
        low = min(value(b) for b in samples[i:] if b.t - a.t <= span_s)
        out.append(replace(a, heap_mb=low))
    return out


def rss_slope(samples: list[Sample], *, min_gap_s: float = 60.0) -> float:
    """RSS growth in MB per minute (``theil_sen``)."""
    return theil_sen(samples, lambda s: s.rss_mb, min_gap_s=min_gap_s)


def _bounded(slope: float, measured: list[float], warm: list[float]) -> bool:
    """Under the slope limit, and no sample after warm-up above 1.25 x the warm-up's peak."""
    return slope < SLOPE_LIMIT_MB_PER_MIN and max(measured) <= 1.25 * max(warm)


def summarize(samples: list[Sample], *, rate: float, warmup_s: float | None = None,
              load_s: float | None = None) -> dict[str, Any]:
    """Throughput, lag and memory figures of a run.

    Memory is judged on the samples after ``warmup_s`` (default: the second half) and while the load
    ran (``load_s``; the drain at the end is left out): bounded when the slope there is under
    ``SLOPE_LIMIT_MB_PER_MIN`` and no sample exceeds the warm-up's peak by 25%. ``memory_bounded`` judges the
    live heap's ``floor`` by ``theil_sen`` when every sample has one (``memory_judged_on``; None when less
    than ``FLOOR_SPAN_S`` + ``MIN_MEASURED_S`` of the run lies after warm-up), else RSS;
    ``rss_bounded`` is the RSS verdict by ``theil_sen`` either way (the heap's ``theil_sen`` slope is reported
    too). Both are None when less than ``MIN_MEASURED_S`` of the run lies after warm-up.
    """
    if len(samples) < 2:
        raise ValueError("a soak summary needs at least two samples")
    first, last = samples[0], samples[-1]
    span = max(last.t - first.t, 1e-9)
    second_half = [s for s in samples if s.t >= last.t / 2] or samples[-2:]
    h0, h1 = second_half[0], second_half[-1]
    growth = (h1.rss_mb - h0.rss_mb) / max((h1.t - h0.t) / 60, 1e-9)
    start = last.t / 2 if warmup_s is None else warmup_s
    end = last.t if load_s is None else load_s
    measured = [s for s in samples if start <= s.t <= end]
    warm = [s for s in samples if s.t < start] or samples[:1]
    enough = len(measured) >= 3 and measured[-1].t - measured[0].t >= MIN_MEASURED_S
    slope = rss_slope(measured) if enough else None
    rss_ok = None if slope is None else _bounded(slope, [s.rss_mb for s in measured], [s.rss_mb for s in warm])
    heaps = [s.heap_mb for s in samples]
    has_heap = all(h is not None for h in heaps)
    heap_slope = heap_peaks = heap_theil_sen = heap_ok = blocks_slope = None
    floored = floor(measured, lambda s: s.heap_mb or 0.0) if has_heap else []
    if has_heap and enough and len(floored) >= 3 and floored[-1].t - floored[0].t >= MIN_MEASURED_S:
        heap_slope = theil_sen(floored, lambda s: s.heap_mb or 0.0)
        heap_peaks = windowed_slope(measured, lambda s: s.heap_mb or 0.0)
        heap_theil_sen = theil_sen(measured, lambda s: s.heap_mb or 0.0)
        heap_ok = _bounded(heap_slope, [s.heap_mb or 0.0 for s in measured], [s.heap_mb or 0.0 for s in warm])
    if enough and all(s.py_blocks is not None for s in measured):
        blocks_slope = theil_sen(measured, lambda s: s.py_blocks or 0.0)
    anon_slope = None  # reported, not judged: it steps with the allocator's retained pages as RSS does
    if enough and all(s.anon_mb is not None for s in measured):
        anon_slope = theil_sen(measured, lambda s: s.anon_mb or 0.0)
    return {
        "duration_s": round(last.t, 1),
        "target_rate_per_s": rate,
        "produced": last.produced,
        "finished": last.finished,
        "exported_distilled": last.distilled,
        "exported_llm": last.llm,
        "throughput_conversations_per_s": round((last.finished - first.finished) / span, 2),
        "lag_max": max(s.lag for s in samples),
        "lag_end": last.lag,
        "rss_mb_start": round(first.rss_mb, 1),
        "rss_mb_end": round(last.rss_mb, 1),
        "rss_mb_max": round(max(s.rss_mb for s in samples), 1),
        "rss_growth_mb_per_min_second_half": round(growth, 2),  # last minus first sample of the second half
        "warmup_s": round(start, 1),
        "rss_mb_at_warmup_end": round(measured[0].rss_mb, 1) if measured else None,
        "rss_slope_mb_per_min_after_warmup": None if slope is None else round(slope, 2),
        "rss_bounded": rss_ok,
        "heap_mb_start": round(heaps[0], 1) if has_heap and heaps[0] is not None else None,
        "heap_mb_at_warmup_end": round(measured[0].heap_mb, 1) if has_heap and measured and measured[0].heap_mb
        is not None else None,
        "heap_mb_end": round(heaps[-1], 1) if has_heap and heaps[-1] is not None else None,
        "heap_slope_mb_per_min_after_warmup": None if heap_slope is None else round(heap_slope, 3),  # its floor's
        "heap_sample_slope_mb_per_min_after_warmup": None if heap_peaks is None else round(heap_peaks, 3),
        "heap_theil_sen_mb_per_min_after_warmup": None if heap_theil_sen is None else round(heap_theil_sen, 3),
        "python_blocks_slope_per_min_after_warmup": None if blocks_slope is None else round(blocks_slope),
        "anon_mb_end": round(last.anon_mb, 1) if last.anon_mb is not None else None,
        "anon_slope_mb_per_min_after_warmup": None if anon_slope is None else round(anon_slope, 2),
        "memory_judged_on": "heap" if has_heap else "rss",
        "memory_bounded": heap_ok if has_heap else rss_ok,
        "kept_up": last.finished >= 0.95 * last.produced - rate * 15,
    }


def plot_rss(samples: list[Sample], path: Path, *, title: str, warmup_s: float | None = None) -> Path:
    """RSS with consumer lag (top) and the live heap (bottom, when exported) over time, as a PNG, each on its own
    scale so steps and slopes show; a dashed line where memory starts to be judged. Flat after it is the goal."""
    import matplotlib

    matplotlib.use("Agg")  # no display: CI and headless servers
    import matplotlib.pyplot as plt

    minutes = [s.t / 60 for s in samples]
    heap = [(m, s.heap_mb) for m, s in zip(minutes, samples, strict=True) if s.heap_mb is not None]
    fig, axes = plt.subplots(2 if heap else 1, 1, figsize=(8, 6.5 if heap else 4.5), dpi=100, sharex=True,
                             squeeze=False)
    try:
        ax = axes[0][0]
        ax.plot(minutes, [s.rss_mb for s in samples], color="tab:blue", marker=".", label="worker RSS")
        ax.set_ylabel("resident memory (MB)", color="tab:blue")
        lag_ax = ax.twinx()
        lag_ax.plot(minutes, [s.lag for s in samples], color="tab:orange", alpha=0.6, label="consumer lag")
        lag_ax.set_ylabel("consumer lag (messages)", color="tab:orange")
        lag_ax.set_ylim(bottom=0, top=max(10.0, 1.1 * max(s.lag for s in samples)))
        ax.set_title(title)
        if heap:
            heap_ax = axes[1][0]
            heap_ax.plot([m for m, _ in heap], [h for _, h in heap], color="tab:green", marker=".")
            heap_ax.set_ylabel("live heap, malloc (MB)", color="tab:green")
        for row in axes:
            row[0].grid(alpha=0.3)
            if warmup_s is not None:
                row[0].axvline(warmup_s / 60, color="grey", linestyle="--", linewidth=1)
        axes[-1][0].set_xlabel("minutes since the load started (dashed: end of warm-up)")
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path


def write_report(samples: list[Sample], summary: dict[str, Any], out_dir: Path, *, title: str) -> dict[str, Path]:
    """``soak.json`` (summary + samples) and ``soak-rss.png`` in ``out_dir``; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "soak.json"
    report.write_text(json.dumps({"summary": summary, "samples": [asdict(s) for s in samples]}, indent=2) + "\n")
    return {"json": report, "plot": plot_rss(samples, out_dir / "soak-rss.png", title=title,
                                             warmup_s=summary.get("warmup_s"))}
