"""`convmon demo`, short and time-compressed, as a user runs it: it ends by itself, the spike shows in the
windowed rates, the shipped ConvmonDsatSpike rule (through a real Prometheus) fires, and the plot is written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.runtime.broker import free_port

pytestmark = [pytest.mark.integration, pytest.mark.long]


def test_short_demo_shows_the_spike_fires_the_shipped_alert_and_writes_the_plot(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    # every conversation judged, so the 15-second alert window (30m / 120) holds the rule's 100 verdicts; 40 s
    # of calm first, because the DSAT rule's standard error counts the baseline's own n (a young baseline
    # must not page) and a shorter calm leaves it too young to show a 3x shift as significant
    env.update(CONVMON_DATA_DIR=str(tmp_path), CONVMON_SAMPLE_RATE="1.0", COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "demo", "--duration", "80", "--rate", "15", "--window", "10",
         "--alert-scale", "120", "--port", str(free_port())],
        env=env, capture_output=True, text=True, timeout=400,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    # the final frame once, not twice
    assert out.count("share of scored conversations showing each pattern") == 1, out[-4000:]
    assert "as shipped, evaluated by Prometheus" in out and "divided by 120 (30m -> 15s)" in out
    shares = re.search(r"judge DSAT share per item \(mean of 10 items\): ([\d.]+)% before the spike, ([\d.]+)% in "
                       r"the last 10s", out)
    assert shares, out[-3000:]
    before, recent = float(shares.group(1)), float(shares.group(2))
    assert 2.0 < before < 9.0 and recent > 2 * before, (before, recent)
    # the shipped rule reads the judge's rates (a distilled model's rate moves at each promotion)
    fired = [int(t) for t in re.findall(r"alert ConvmonDsatSpike fired at t=(\d+)s on the judge rates",
                                        out)]
    plot = re.search(r"plot: (\S+\.png)", out)
    assert plot, out[-2000:]
    png = Path(plot.group(1))
    png = png if png.is_absolute() else Path.cwd() / png
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 30_000
    # #33: it fired in 2 of 4 runs while the baseline tiled 2.5 s increases of 2 s scrapes (read 45 of ~450
    # verdicts: z under 3) and each new dimensioned series hid its first "yes" from increase()
    assert any(t >= 40 for t in fired), out[-3000:]  # after the spike (t=40s)


def test_control_demo_without_the_spike_never_fires_the_alert(tmp_path: Path) -> None:
    """The same traffic without the spike (`--no-spike`): the shipped rule must stay silent on both scorers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env.update(CONVMON_DATA_DIR=str(tmp_path), CONVMON_SAMPLE_RATE="1.0", COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "demo", "--duration", "80", "--rate", "15", "--window", "10",
         "--alert-scale", "120", "--no-spike", "--port", str(free_port())],
        env=env, capture_output=True, text=True, timeout=400,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "as shipped, evaluated by Prometheus" in out, out[-3000:]
    assert "simulated DSAT spike" not in out, out[-3000:]
    assert "alert ConvmonDsatSpike did not fire" in out, out[-3000:]
    assert "fired at t=" not in out, out[-3000:]
