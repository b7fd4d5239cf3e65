"""``bench detect --plot``: the 30-minute rates around the spike, the spike window and when the alert fired."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from monitor.tools.bench.detect import DetectConfig  # noqa: E402

STYLE = {"judge": ("judge slice", "tab:blue"), "distilled_mean": ("distilled mean", "tab:orange"),
         "distilled_verdicts": ("distilled verdicts", "tab:brown"), "ppi": ("prediction-powered", "tab:green")}


def plot_detect(keep: dict[str, Any], config: DetectConfig, path: Path) -> Path:
    """One panel per spike factor, for the first seed and the first judge rate."""
    fig, axes = plt.subplots(len(keep), 1, figsize=(10, 3.6 * len(keep)), sharex=True, squeeze=False)
    for ax, (factor, run) in zip(axes[:, 0], keep.items(), strict=True):
        start = run["start"]
        lo = max(0, start - 180)
        hours = (np.arange(lo, len(run["target"])) + 1 - start) / 60
        ax.axvspan(0, config.spike_minutes / 60, color="tab:red", alpha=0.08, label="spike window")
        ax.plot(hours, run["target"][lo:], color="black", lw=1.2, label="target (judge all traffic)")
        for name, (label, color) in STYLE.items():
            s = run["series"][name]
            ax.plot(hours, s.rate[lo:], color=color, lw=1, label=label)
            if name == "ppi":
                ax.fill_between(hours, (s.rate - 1.96 * s.se)[lo:], (s.rate + 1.96 * s.se)[lo:], color=color,
                                alpha=0.15, lw=0)
            fired = np.flatnonzero(run["fired"][name][lo:])
            if len(fired):
                ax.plot(hours[fired], np.full(len(fired), 0.97), "|", color=color, ms=8,
                        transform=ax.get_xaxis_transform())
        ax.set_ylabel("30-minute DSAT rate")
        peak = min(1.0, float(factor[:-1]) * config.base_share)
        ax.set_title(f"{factor} spike: DSAT share {config.base_share:g} -> {peak:g}"
                     f" (seed {config.seeds[0]}, judge rate {config.rates[0]:g}; ticks at the top: alert firing)",
                     fontsize=9)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=3, loc="center left")
    axes[-1, 0].set_xlabel("hours from the spike's start (simulated time)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
