"""Calibration report: a markdown table beside the paper's numbers and a reliability plot (PNG).

The plot shows P(satisfied) = P(answer >= 3) against the observed satisfied rate, smoothed with the
same reflected Gaussian kernel as the smoothed ECE, because that probability is what the monitor
sums into its exported rates: a curve off the diagonal means a biased dashboard.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from distill.calibration.evaluate import Evaluation, kernel_smooth  # noqa: E402
from distill.calibration.network import satisfied_probability  # noqa: E402

__all__ = ["PAPER_SYNTHETIC_Q0", "render_markdown", "reliability_plot", "write_report"]

#: LLM-Rubric (Hashemi et al., 2024) Table 1, synthetic conversations, Q0, 5-fold CV.
PAPER_SYNTHETIC_Q0: dict[str, dict[str, float]] = {
    "llm_rubric": {"rmse": 0.396, "pearson": 0.401},
    "calibrated_target_only": {"rmse": 0.801},
}

LABELS = {
    "llm_rubric": "LLM-Rubric (personalized)",
    "random": "Random answer",
    "judge_argmax": "Argmax judge answer",
    "judge_expected": "Expected judge answer",
    "calibrated_target_only": "Calibrated target only",
    "llm_rubric_shared_only": "LLM-Rubric, no judge params (ablation)",
    "constant_mean": "Constant training mean",
}


def _fmt(value: float | None) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def render_markdown(ev: Evaluation, *, paper: dict[str, dict[str, float]] | None = None) -> str:
    """Per-annotation metrics of every method, with the paper's values where it reports them."""
    paper = PAPER_SYNTHETIC_Q0 if paper is None else paper
    head = ("| method | RMSE | Pearson | Spearman | Kendall | log-lik | smECE | paper RMSE | paper Pearson |\n"
            "|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name, s in ev.scores.items():
        ref = paper.get(name, {})
        rows.append(f"| {LABELS.get(name, name)} | {_fmt(s['rmse'])} | {_fmt(s['pearson'])} | "
                    f"{_fmt(s['spearman'])} | {_fmt(s['kendall'])} | {_fmt(s.get('log_likelihood'))} | "
                    f"{_fmt(s.get('smooth_ece'))} | {_fmt(ref.get('rmse'))} | {_fmt(ref.get('pearson'))} |")
    dl = ["| method | RMSE | Pearson | Spearman | Kendall |", "|---|---|---|---|---|"]
    dl += [f"| {LABELS.get(n, n)} | {_fmt(s['rmse'])} | {_fmt(s['pearson'])} | {_fmt(s['spearman'])} | "
           f"{_fmt(s['kendall'])} |" for n, s in ev.dialogue_level.items()]
    hp = ", ".join(f"{k}={v}" for k, v in sorted(ev.hyperparameters.items()))
    return "\n".join([
        f"## Calibration of {ev.target} ({ev.protocol})", "",
        f"{ev.scores['llm_rubric']['n']} labels (one per dialogue and annotator). Hyper-parameters: {hp}.",
        "", head, *rows, "",
        "Dialogue level (mean prediction vs mean label over each dialogue's annotators):", "", *dl, "",
        "smECE is the smoothed ECE of P(satisfied) = P(answer >= 3); log-lik is the mean held-out "
        "log-likelihood of the true answer.", "",
    ])


def reliability_plot(ev: Evaluation, path: Path | str, *, threshold: int = 3,
                     methods: tuple[str, ...] = ("llm_rubric", "calibrated_target_only", "judge_expected",
                                                 "constant_mean")) -> Path:
    """Smoothed reliability curves of P(satisfied), with a histogram of the LLM-Rubric predictions."""
    path = Path(path)
    fig, (ax, hist) = plt.subplots(2, 1, figsize=(5.5, 6.5), height_ratios=(3, 1), sharex=True)
    t = np.linspace(0.0, 1.0, 200)
    outcome = (ev.y >= threshold).astype(float)
    for name in methods:
        if name not in ev.predictions:
            continue
        f = satisfied_probability(ev.predictions[name][1], ev.classes, threshold=threshold)
        density = kernel_smooth(f, np.ones_like(f), 0.05, t)
        residual = kernel_smooth(f, outcome - f, 0.05, t)
        curve = np.where(density > 0.05, t + residual / np.maximum(density, 1e-12), np.nan)
        ax.plot(t, curve, label=f"{LABELS.get(name, name)} (smECE {ev.scores[name]['smooth_ece']:.3f})")
    ax.plot([0, 1], [0, 1], "k:", lw=1, label="perfect calibration")
    ax.set(ylabel="observed P(satisfied)", xlim=(0, 1), ylim=(0, 1),
           title=f"Reliability of P({ev.target} >= {threshold}), {ev.protocol}")
    ax.legend(fontsize=7, loc="upper left")
    f_main = satisfied_probability(ev.predictions["llm_rubric"][1], ev.classes, threshold=threshold)
    hist.hist(f_main, bins=30, range=(0, 1), color="C0")
    hist.set(xlabel="predicted P(satisfied)", ylabel="count")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_report(ev: Evaluation, out_dir: Path | str) -> tuple[Path, Path]:
    """Write ``calibration.md`` and ``reliability.png`` into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    png = reliability_plot(ev, out_dir / "reliability.png")
    md = out_dir / "calibration.md"
    md.write_text(render_markdown(ev) + f"\n![reliability]({png.name})\n", encoding="utf-8")
    return md, png
