"""`convmon bench open-conversations` on a real broker and worker: the cap holds and the numbers are there."""

from __future__ import annotations

import pytest

from bench.open_conversations import run_open_conversations


@pytest.mark.long
def test_the_bench_reports_a_capped_worker_and_its_restore() -> None:
    result = run_open_conversations(3000, max_open=500, partitions=2, timeout_s=180.0)
    assert result["open"] == 1000 and result["evicted"] == 2000  # 2 partitions x 500 open, the rest evicted
    assert result["rss_mb_after"] > 0 and result["scrape_failures"] == 0
    assert 0 < result["restart_ready_s"] <= result["restart_restored_s"]
