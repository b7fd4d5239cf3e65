"""convmon_process_anon_memory_bytes sees Python objects, which the allocator's heap gauge does not (#34)."""

from __future__ import annotations

import math
from pathlib import Path

from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import Metrics
from monitor.runtime.allocator import anon_resident_bytes, export_anon


def test_it_reads_rssanon_and_grows_with_python_objects() -> None:
    metrics = Metrics(CollectorRegistry())
    export_anon(metrics.anon_memory)
    before = metrics.registry.get_sample_value("convmon_process_anon_memory_bytes")
    assert before is not None and before > 0
    held = [{"turn": i, "text": f"t{i}"} for i in range(300_000)]  # ~100 MB of small objects: pymalloc arenas
    after = metrics.registry.get_sample_value("convmon_process_anon_memory_bytes")
    assert after is not None and after - before > 30e6, (before, after)
    del held


def test_it_says_nan_without_proc(tmp_path: Path) -> None:
    assert math.isnan(anon_resident_bytes(tmp_path / "absent"))
    (tmp_path / "status").write_text("Name:\tpython\nRssAnon:\t  2048 kB\n")
    assert anon_resident_bytes(tmp_path / "status") == 2048 * 1024
