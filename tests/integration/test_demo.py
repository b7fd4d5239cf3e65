"""`convmon demo` with its defaults, as a user runs it: it ends by itself, the spike shows in the windowed rates,
the shipped alert on the corrected distilled rate (through a real Prometheus) fires after the spike, and the
plot is written; the control run without the spike fires nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.runtime.broker import free_port

pytestmark = [pytest.mark.integration, pytest.mark.long]


def _demo(tmp_path: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env.update(CONVMON_DATA_DIR=str(tmp_path), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "monitor.cli", "demo", "--port", str(free_port()), *args],
                          env=env, capture_output=True, text=True, timeout=400)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "as shipped, evaluated by Prometheus" in out and "divided by 120 (30m -> 15s)" in out, out[-3000:]
    return out


def test_the_demo_shows_the_spike_fires_the_shipped_corrected_rate_alert_and_writes_the_plot(tmp_path: Path) -> None:
    out = _demo(tmp_path)
    # the final frame once, not twice
    assert out.count("share of scored conversations showing each pattern") == 1, out[-4000:]
    shares = re.search(r"judge DSAT share per item \(mean of 10 items\): ([\d.]+)% before the spike, ([\d.]+)% in "
                       r"the last 20s", out)
    assert shares, out[-3000:]
    before, recent = float(shares.group(1)), float(shares.group(2))
    assert 2.0 < before < 9.0 and recent > 2 * before, (before, recent)
    plot = re.search(r"plot: (\S+\.png)", out)
    assert plot, out[-2000:]
    png = Path(plot.group(1))
    png = png if png.is_absolute() else Path.cwd() / png
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 30_000
    # a quarter of the traffic judged: the judged slice alone holds under the 100 verdicts a window its own alert
    # wants, the distilled rate corrected by it pages, after the spike (t=50s) and not before
    fired = [int(t) for t in re.findall(r"alert ConvmonDsatSpikeCorrected fired at t=(\d+)s on the corrected "
                                        r"distilled rates", out)]
    assert fired and all(t >= 50 for t in fired), out[-3000:]


def test_control_demo_without_the_spike_never_fires_an_alert(tmp_path: Path) -> None:
    """The same traffic without the spike (`--no-spike`): neither shipped DSAT-spike alert fires."""
    out = _demo(tmp_path, "--no-spike")
    assert "simulated DSAT spike" not in out, out[-3000:]
    assert "alert ConvmonDsatSpikeCorrected did not fire" in out, out[-3000:]
    assert "alert ConvmonDsatSpike did not fire" in out, out[-3000:]
    assert "fired at t=" not in out, out[-3000:]
