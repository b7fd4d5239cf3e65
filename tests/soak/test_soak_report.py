"""The soak's report from samples: JSON with every sample, a PNG plot, and the flat/growing verdict."""

from __future__ import annotations

import json
from pathlib import Path

from monitor.tools.soak import Sample, summarize, warmup_for, write_report


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
    warmup = warmup_for(120.0)  # the CI soak's 120 s windows + 10 s idle timeout + 60 s margin
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
