"""convmon_process_anon_memory_bytes sees Python objects, which the allocator's heap gauge does not."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from monitor.runtime.allocator import anon_resident_bytes

# In a fresh interpreter: inside a long-lived test process the allocator reuses memory freed by earlier tests, so
# the same objects may not raise RssAnon at all (a make test run: +21 MB on a 789 MB worker).
_GROW = """
from prometheus_client import CollectorRegistry
from monitor.contracts.metrics import Metrics
from monitor.runtime.allocator import export_anon
metrics = Metrics(CollectorRegistry())
export_anon(metrics.anon_memory)
before = metrics.registry.get_sample_value("convmon_process_anon_memory_bytes")
held = [{"turn": i, "text": f"t{i}"} for i in range(300_000)]  # ~100 MB of small objects: pymalloc arenas
after = metrics.registry.get_sample_value("convmon_process_anon_memory_bytes")
print(before, after)
"""


def test_it_reads_rssanon_and_grows_with_python_objects() -> None:
    out = subprocess.run([sys.executable, "-c", _GROW], capture_output=True, text=True, check=True, timeout=120)
    before, after = (float(v) for v in out.stdout.split())
    assert before > 0
    assert after - before > 30e6, (before, after)


def test_it_says_nan_without_proc(tmp_path: Path) -> None:
    assert math.isnan(anon_resident_bytes(tmp_path / "absent"))
    (tmp_path / "status").write_text("Name:\tpython\nRssAnon:\t  2048 kB\n")
    assert anon_resident_bytes(tmp_path / "status") == 2048 * 1024
