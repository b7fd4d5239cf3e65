"""Training report: a markdown table per item plus ROC and reliability plots (matplotlib, Agg).

Written next to nothing else: ``<dir>/report.md``, ``<dir>/roc.png``, ``<dir>/reliability.png``.
Untrained items appear with their reason ("insufficient positives: 3 < 10") so a missing item is
never silent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.typing import LegendLocType  # noqa: E402
from sklearn.calibration import calibration_curve  # noqa: E402
from sklearn.metrics import roc_curve  # noqa: E402

from monitor.contracts.rubric_set import RubricSet  # noqa: E402

if TYPE_CHECKING:
    from distill.promotion import Evaluation
    from distill.retrain_result import RetrainResult


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _plot_items(evaluation: Evaluation, path: Path, curve: Callable[[np.ndarray, np.ndarray], tuple[Any, Any]],
                label: Callable[[str], str], *, style: dict[str, Any], xlabel: str, ylabel: str, title: str,
                legend: LegendLocType) -> None:
    """One curve per item with both classes in the held-out set, over the diagonal, saved to ``path``."""
    fig, ax = plt.subplots(figsize=(6, 6))
    for item_id, (y, p) in evaluation.predictions.items():
        if 0 < y.sum() < len(y):
            x_values, y_values = curve(y, p)
            ax.plot(x_values, y_values, **style, label=label(item_id))
    ax.plot([0, 1], [0, 1], "k--", lw=0.8)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend(fontsize=6, loc=legend)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_roc(evaluation: Evaluation, path: Path) -> None:
    def roc(y: np.ndarray, p: np.ndarray) -> tuple[Any, Any]:
        fpr, tpr, _ = roc_curve(y, p)
        return fpr, tpr

    _plot_items(evaluation, path, roc, lambda i: f"{i} ({_fmt(evaluation.items[i].roc_auc)})",
                style={"lw": 1}, xlabel="false positive rate", ylabel="true positive rate",
                title="ROC vs teacher (held-out)", legend="lower right")


def plot_reliability(evaluation: Evaluation, path: Path, *, n_bins: int = 10) -> None:
    def reliability(y: np.ndarray, p: np.ndarray) -> tuple[Any, Any]:
        frac, mean = calibration_curve(y, p, n_bins=n_bins, strategy="quantile")
        return mean, frac

    _plot_items(evaluation, path, reliability, str, style={"marker": "o", "ms": 3, "lw": 1},
                xlabel="predicted P(yes)", ylabel="observed frequency", title="Reliability (held-out)",
                legend="upper left")


def render_markdown(result: RetrainResult, rubric: RubricSet) -> str:
    ev, live = result.evaluation, result.live_evaluation
    lines = [
        f"# Distillation report: {rubric.key}", "",
        f"- status: **{result.status}**; version: `{result.version}`; compared with live: `{result.live_version}`",
        f"- labelled conversations: {result.n_labels}",
        *(f"- {reason}" for reason in result.reasons), "",
        "| item | status | held-out n | positives | ROC-AUC | AP | F1 @ thr | threshold | Brier | live ROC-AUC |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for item in rubric.items:
        status = result.item_status.get(item.id, "not labelled")
        m = ev.items.get(item.id) if ev else None
        live_auc = _fmt(live.items[item.id].roc_auc) if live and item.id in live.items else "—"
        if m is None:
            lines.append(f"| {item.id} | {status} | — | — | — | — | — | — | — | {live_auc} |")
            continue
        lines.append(
            f"| {item.id} | {status} | {m.n} | {m.positives} | {_fmt(m.roc_auc)} | {_fmt(m.average_precision)} | "
            f"{m.f1:.3f} | {m.threshold:.3f} | {m.brier:.4f} | {live_auc} |"
        )
    if ev:
        lines += ["", f"Macro ROC-AUC {_fmt(ev.macro('roc_auc'))}, macro Brier {_fmt(ev.macro('brier'))}.", "",
                  "![ROC](roc.png)", "", "![Reliability](reliability.png)"]
    return "\n".join(lines) + "\n"


def write_report(result: RetrainResult, directory: Path, *, rubric: RubricSet) -> Path:
    """Write report.md (+ PNGs when there is an evaluation); returns the markdown path."""
    directory.mkdir(parents=True, exist_ok=True)
    if result.evaluation is not None and result.evaluation.predictions:
        plot_roc(result.evaluation, directory / "roc.png")
        plot_reliability(result.evaluation, directory / "reliability.png")
    path = directory / "report.md"
    path.write_text(render_markdown(result, rubric), encoding="utf-8")
    return path


def summary_rows(result: RetrainResult) -> list[tuple[str, str, str, str]]:
    """(item, status, ROC-AUC, Brier) rows for a terminal table."""
    ev = result.evaluation
    rows = []
    for item_id, status in result.item_status.items():
        m = ev.items.get(item_id) if ev else None
        rows.append((item_id, status, _fmt(m.roc_auc if m else None), _fmt(m.brier if m else None)))
    return rows


__all__ = ["plot_reliability", "plot_roc", "render_markdown", "summary_rows", "write_report"]
