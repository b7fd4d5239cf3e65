"""``bench detect --plot``: the 30-minute rates around the spike, the spike window and when the alert fired."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


class PlotConfig(Protocol):
    """The run settings the plot names (``detect.DetectConfig``; not imported: detect imports this module)."""

    @property
    def spike_minutes(self) -> int: ...
    @property
    def base_share(self) -> float: ...
    @property
    def seeds(self) -> Sequence[int]: ...
    @property
    def rates(self) -> Sequence[float]: ...


STYLE = {"judge": ("judge slice", "tab:blue"), "distilled_mean": ("distilled mean", "tab:orange"),
         "distilled_verdicts": ("distilled verdicts", "tab:brown"), "ppi": ("prediction-powered", "tab:green")}


def plot_detect(keep: dict[str, dict[str, Any]], config: PlotConfig, path: Path) -> Path:
    """One panel per source and spike factor, for the first seed and the first judge rate."""
    panels = [(source, factor, run) for source, runs in keep.items() for factor, run in runs.items()]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 3.4 * len(panels)), sharex=True, squeeze=False)
    for ax, (source, factor, run) in zip(axes[:, 0], panels, strict=True):
        start = run["start"]
        lo = max(0, start - 180)
        hours = (np.arange(lo, len(run["target"])) + 1 - start) / 60
        ax.axvspan(0, config.spike_minutes / 60, color="tab:red", alpha=0.08, label="spike window")
        ax.plot(hours, run["target"][lo:], color="black", lw=1.2, label="target (judge all traffic)")
        for k, (name, (label, color)) in enumerate(STYLE.items()):
            s = run["series"][name]
            ax.plot(hours, s.rate[lo:], color=color, lw=1, label=label)
            if name == "ppi":
                ax.fill_between(hours, (s.rate - 1.96 * s.se)[lo:], (s.rate + 1.96 * s.se)[lo:], color=color,
                                alpha=0.15, lw=0)
            fired = np.flatnonzero(run["fired"][name][lo:])
            if len(fired):
                ax.plot(hours[fired], np.full(len(fired), 0.96 - 0.06 * k), "|", color=color, ms=6,
                        transform=ax.get_xaxis_transform())
        ax.set_ylabel("30-minute DSAT rate")
        peak = min(1.0, float(factor[:-1]) * config.base_share)
        ax.set_title(f"{source}, {factor} spike: DSAT share {config.base_share:g} -> {peak:g} (seed "
                     f"{config.seeds[0]}, judge rate {config.rates[0]:g}; ticks at the top: alert firing, one row "
                     "per rate)", fontsize=9)
        ax.set_ylim(0, 0.75)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=3, loc="center left")
    axes[-1, 0].set_xlabel("hours from the spike's start (simulated time)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
