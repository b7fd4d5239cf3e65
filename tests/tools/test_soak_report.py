"""The soak's report from samples: JSON with every sample, a PNG plot, and the flat/growing verdict."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from monitor.tools.soak_report import Sample, summarize, warmup_for, write_report


def _samples(growth_mb_per_min: float, *, fill_s: float = 60, until: int = 600) -> list[Sample]:
    """RSS that fills for ``fill_s`` (a window warming up: +10 MB a minute), then grows at the given rate."""
    return [Sample(t=t, produced=8 * int(t), finished=8 * int(t), distilled=8 * int(t), llm=int(t), lag=0.0,
                   rss_mb=380 + min(t, fill_s) / 6 + growth_mb_per_min * max(0, t - fill_s) / 60)
            for t in range(0, until + 1, 10)]


def test_report_has_json_and_png_and_tells_flat_from_growing(tmp_path: Path) -> None:
    flat = summarize(_samples(0.0), rate=8)
    assert flat["memory_bounded"] and flat["kept_up"]
    growing = summarize(_samples(6.5), rate=8)
    assert not growing["memory_bounded"] and growing["rss_growth_mb_per_min_second_half"] == 6.5
    assert growing["rss_slope_mb_per_min_after_warmup"] == 6.5
    paths = write_report(_samples(6.5), growing, tmp_path / "out", title="t")
    report = json.loads(paths["json"].read_text())
    assert report["summary"] == growing and len(report["samples"]) == 61
    assert report["samples"][-1]["rss_mb"] == _samples(6.5)[-1].rss_mb
    png = paths["plot"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_memory_is_judged_after_the_windows_warm_up() -> None:
    """A window filling for 3 minutes is not a leak once the check starts after it; a slow leak after it is."""
    warmup = warmup_for(60.0)  # the CI soak's 60 s windows (the ledger's two) + 10 s idle timeout + 60 s margin
    assert warmup == 190.0
    fill = _samples(0.0, fill_s=180)
    assert summarize(fill, rate=8, warmup_s=warmup)["memory_bounded"] is True
    long_fill = _samples(0.0, fill_s=480)  # a window longer than the warm-up assumed: still growing when judged
    assert summarize(long_fill, rate=8, warmup_s=warmup)["memory_bounded"] is False
    leak = summarize(_samples(1.5, fill_s=180), rate=8, warmup_s=warmup)
    assert leak["memory_bounded"] is False and leak["rss_slope_mb_per_min_after_warmup"] == 1.5


def test_one_noisy_sample_does_not_decide_and_a_short_run_gives_no_verdict() -> None:
    noisy = _samples(0.0)
    for k in range(-3, 0):  # a high-water step of 8 MB 30 s before the end (least squares would say 1.6 MB/min)
        noisy[k] = Sample(**{**noisy[k].__dict__, "rss_mb": noisy[k].rss_mb + 8})
    assert summarize(noisy, rate=8, warmup_s=190)["memory_bounded"] is True
    drained = _samples(0.0) + [Sample(t=700, produced=4800, finished=4800, distilled=4800, llm=600, lag=0.0,
                                      rss_mb=300)]
    assert summarize(drained, rate=8, warmup_s=190, load_s=600)["rss_slope_mb_per_min_after_warmup"] == 0.0
    short = summarize(_samples(0.0, until=240), rate=8, warmup_s=190)
    assert short["memory_bounded"] is None and short["rss_slope_mb_per_min_after_warmup"] is None
    assert warmup_for(None) == 2 * 86400 + 70  # the default dedup window: a 10-minute soak cannot judge it


def _with_heap(samples: list[Sample], heap: Callable[[float], float], rss_step_at: float | None = None) -> list[Sample]:
    """``samples`` with a live heap of ``heap(t)`` MB, and RSS 20 MB higher from ``rss_step_at`` (an allocator
    high-water step, as jemalloc's 10-22 MB ones)."""
    return [replace(s, heap_mb=heap(s.t), py_blocks=250_000.0,
                    rss_mb=s.rss_mb + (20 if rss_step_at is not None and s.t >= rss_step_at else 0)) for s in samples]


def test_the_verdict_is_on_the_live_heap_when_the_worker_exports_it(tmp_path: Path) -> None:
    """An RSS step after warm-up with a flat heap passes (RSS alone would fail it); a 1.5 MB/min heap leak under
    a flat RSS fails (RSS alone would pass it). RSS keeps its own verdict, for information."""
    stepped = summarize(_with_heap(_samples(0.0, fill_s=180), lambda t: 140.0, rss_step_at=390), rate=8,
                        warmup_s=190)
    assert stepped["memory_judged_on"] == "heap" and stepped["memory_bounded"] is True
    assert stepped["heap_slope_mb_per_min_after_warmup"] == 0.0 and stepped["heap_mb_end"] == 140.0
    assert stepped["rss_bounded"] is False and stepped["rss_slope_mb_per_min_after_warmup"] > 1.0
    leaking = summarize(_with_heap(_samples(0.0, fill_s=180), lambda t: 140.0 + 1.5 * t / 60), rate=8,
                        warmup_s=190)
    assert leaking["memory_bounded"] is False and leaking["heap_slope_mb_per_min_after_warmup"] == 1.5
    assert leaking["rss_bounded"] is True and leaking["python_blocks_slope_per_min_after_warmup"] == 0
    rss_only = summarize(_samples(0.0, fill_s=180), rate=8, warmup_s=190)  # glibc or an old worker: no heap
    assert rss_only["memory_judged_on"] == "rss" and rss_only["heap_slope_mb_per_min_after_warmup"] is None
    assert rss_only["memory_bounded"] is rss_only["rss_bounded"] is True
    paths = write_report(_with_heap(_samples(0.0), lambda t: 140.0), stepped, tmp_path, title="t")
    assert json.loads(paths["json"].read_text())["samples"][0]["heap_mb"] == 140.0


def test_a_heap_step_mid_run_does_not_decide_and_a_leak_still_does() -> None:
    """A 5 MB heap step in the middle of the judged minutes moves only the one-minute windows that hold it
    (Theil-Sen over all pairs reads it as growth); a 1 MB/min leak on top of the same step still fails."""
    step = summarize(_with_heap(_samples(0.0, fill_s=180), lambda t: 140.0 + (5 if t >= 395 else 0)), rate=8,
                     warmup_s=190)
    assert step["memory_bounded"] is True and step["heap_slope_mb_per_min_after_warmup"] == 0.0
    assert step["heap_theil_sen_mb_per_min_after_warmup"] > 1.0
    leak = summarize(_with_heap(_samples(0.0, fill_s=180), lambda t: 140.0 + (5 if t >= 395 else 0) + t / 60),
                     rate=8, warmup_s=190)
    assert leak["memory_bounded"] is False and leak["heap_slope_mb_per_min_after_warmup"] == 1.0


def _sawtooth(t: float) -> float:
    """The engine's heap between collections: +3 MB over 140 s, then collected back (a cycle every 150 s)."""
    phase = t % 150
    return 140.0 + (3.0 * phase / 140 if phase < 140 else 3.0 * (150 - phase) / 10)


def test_garbage_awaiting_collection_is_not_a_leak_and_a_leak_under_it_still_is() -> None:
    """Most one-minute windows of a rise-and-collect cycle rise (their median reads over 1 MB/min on a flat heap);
    the floor over three minutes does not, and a leak raises the floor."""
    flat = summarize(_with_heap(_samples(0.0, fill_s=180), _sawtooth), rate=8, warmup_s=190)
    assert flat["heap_sample_slope_mb_per_min_after_warmup"] > 1.0  # what the samples' own slopes said
    assert flat["memory_bounded"] is True and flat["heap_slope_mb_per_min_after_warmup"] == 0.0
    for mb_per_min in (1.2, 1.5):
        leak = summarize(_with_heap(_samples(0.0, fill_s=180), lambda t, r=mb_per_min: _sawtooth(t) + r * t / 60),
                         rate=8, warmup_s=190)
        assert leak["memory_bounded"] is False
        assert abs(leak["heap_slope_mb_per_min_after_warmup"] - mb_per_min) < 0.05


def test_the_engines_soak_samples_are_flat_by_their_floor() -> None:
    """The heap of the engine's first soak with a full first model (10402a1, 2026-12-06), every 30 s: flat
    (139.6 -> 140.2 MB) under its collection cycle."""
    heap = [135.9, 139.2, 140.7, 140.3, 139.5, 150.9, 142.4, 141.8, 140.8, 140.1, 143.0, 142.0, 140.4, 143.5, 142.5,
            141.0, 139.6, 142.9, 141.9, 141.2, 140.2]
    samples = [replace(s, heap_mb=heap[int(s.t) // 30], py_blocks=1.2e6) for s in _samples(0.0, fill_s=180)]
    summary = summarize(samples, rate=8, warmup_s=190)
    assert summary["memory_bounded"] is True and summary["heap_slope_mb_per_min_after_warmup"] < 0.5
