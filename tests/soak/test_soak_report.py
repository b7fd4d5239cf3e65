"""The soak's report from samples: JSON with every sample, a PNG plot, and the flat/growing verdict."""

from __future__ import annotations

import json
from pathlib import Path

from monitor.tools.soak import Sample, summarize, write_report


def _samples(growth_mb_per_min: float) -> list[Sample]:
    return [Sample(t=t, produced=8 * int(t), finished=8 * int(t), distilled=8 * int(t), llm=int(t), lag=0.0,
                   rss_mb=380 + min(t, 60) / 6 + growth_mb_per_min * max(0, t - 60) / 60)
            for t in range(0, 601, 10)]


def test_report_has_json_and_png_and_tells_flat_from_growing(tmp_path: Path) -> None:
    flat = summarize(_samples(0.0), rate=8)
    assert flat["memory_bounded"] and flat["kept_up"]
    growing = summarize(_samples(6.5), rate=8)
    assert not growing["memory_bounded"] and growing["rss_growth_mb_per_min_second_half"] == 6.5
    paths = write_report(_samples(6.5), growing, tmp_path / "out", title="t")
    report = json.loads(paths["json"].read_text())
    assert report["summary"] == growing and len(report["samples"]) == 61
    assert report["samples"][-1]["rss_mb"] == _samples(6.5)[-1].rss_mb
    png = paths["plot"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
