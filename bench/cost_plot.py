"""The ``bench cost`` figure: per-item rate error (95 %, worst item) against judge spend per 1M conversations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

FLOOR = 0.1  # judging 100 % has error 0, which a log axis cannot show
LABELS = {"judge_only": "judge only", "distilled_only": "distilled only", "ppi": "prediction-powered",
          "ppi_tuned": "prediction-powered, tuned (PPI++)"}


def plot_cost(result: dict[str, Any], path: Path) -> Path:
    sources = result["sources"]
    fig, axes = plt.subplots(1, len(sources), figsize=(5.5 * len(sources), 4.2), squeeze=False)
    for ax, source in zip(axes[0], sources, strict=True):
        rows = sorted(source["rows"], key=lambda r: r["usd_per_million"])
        spend = [r["usd_per_million"] for r in rows]
        for estimator, label in LABELS.items():
            ax.plot(spend, [max(r[f"{estimator}_p95_max_points"], FLOOR) for r in rows], marker="o", label=label)
        ax.axhline(result["tolerance_points"], color="grey", linestyle="--", linewidth=1, label="±1 point")
        for r in rows:
            ax.annotate(f"{r['slice']:.1%}", (r["usd_per_million"], max(r["ppi_p95_max_points"], FLOOR)), fontsize=7,
                        textcoords="offset points", xytext=(3, 4))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("judge spend, USD per 1M conversations")
        ax.set_ylabel(f"95 % |error| of the worst item, points (0 drawn at {FLOOR})")
        ax.set_title(f"{source['source']} ({source['items']} item{'s' if source['items'] > 1 else ''})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Per-item rate error over 1-hour windows of {result['volume_per_hour']:,} conversations")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
