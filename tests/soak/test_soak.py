"""The 10-minute soak CI runs (`make soak-ci`, marker `soak`): a real broker, a real worker process,
simulated load; the worker's live heap must be flat after warm-up and the worker must keep up.

Deselected from the default run (pyproject `addopts`); the report's plot and JSON land in
``var/soak-ci`` (or ``$CONVMON_SOAK_OUT``) so CI can keep them as artifacts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from monitor.contracts.settings import REPO_ROOT
from monitor.tools.soak import soak

MINUTES = float(os.environ.get("CONVMON_SOAK_MINUTES", "10"))
RATE = float(os.environ.get("CONVMON_SOAK_RATE", "8"))
# Tombstones, dedup entries and reopenable conversations expire after 1 minute here (1 hour, 2 days and 1 day by
# default), so the state they hold reaches its steady size during the warm-up (the revisions ledger's 2 windows +
# idle timeout + 60 s = 190 s) and the slope over the remaining 7 minutes shows what else grows.
RETENTION_S = float(os.environ.get("CONVMON_SOAK_RETENTION_S", "60"))


@pytest.mark.soak
@pytest.mark.timeout(int(MINUTES * 60) + 600)
def test_ten_minute_soak_is_flat_and_keeps_up() -> None:
    out = Path(os.environ.get("CONVMON_SOAK_OUT", REPO_ROOT / "var" / "soak-ci"))
    summary = soak(MINUTES, RATE, out_dir=out, retention_s=RETENTION_S)
    report = json.loads((out / "soak.json").read_text())
    assert report["summary"]["duration_s"] >= MINUTES * 60 * 0.95
    assert (out / "soak-rss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary["worker_alive_at_end"], f"the worker died; logs in {summary['logs']}"
    assert summary["malloc"] == "jemalloc", summary  # the allocator the image ships (runtime/allocator.py)
    assert summary["kept_up"], summary
    assert summary["memory_judged_on"] == "heap", summary  # jemalloc's stats.allocated, not RSS's steps
    assert summary["memory_bounded"], (
        f"the live heap grew {summary['heap_slope_mb_per_min_after_warmup']} MB/min (its 3-minute floor's slope) "
        f"after the {summary['warmup_s']} s warm-up ({summary['heap_mb_at_warmup_end']} -> "
        f"{summary['heap_mb_end']} MB; RSS {summary['rss_slope_mb_per_min_after_warmup']} MB/min, "
        f"{summary['rss_mb_at_warmup_end']} -> {summary['rss_mb_end']} MB); plot: {out / 'soak-rss.png'}")
