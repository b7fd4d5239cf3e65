"""Calibration report: markdown tables beside the paper's numbers and a reliability plot (PNG).

The first table scores the expected answer (rating) of every method, the second P(satisfied) of
every method that gives one; SPUR Appendix D's linear head has only a rating and its logistic head
only P(satisfied), so each appears in one table.

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

from distill.calibration.crossval import APPENDIX_D_FEATURES, Evaluation, kernel_smooth  # noqa: E402

__all__ = ["PAPER_SYNTHETIC_Q0", "render_markdown", "reliability_plot", "write_report"]

#: LLM-Rubric (Hashemi et al., 2024) Table 1, synthetic conversations, Q0, 5-fold CV.
PAPER_SYNTHETIC_Q0: dict[str, dict[str, float]] = {
    "llm_rubric": {"rmse": 0.396, "pearson": 0.401},
    "calibrated_target_only": {"rmse": 0.801},
}

LABELS = {
    "llm_rubric": "LLM-Rubric (personalized)",
    "appendix_d_linear": "SPUR App. D, linear head (rubric scores)",
    "appendix_d_logistic": "SPUR App. D, logistic head (rubric scores)",
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
        if "rmse" not in s:
            continue
        ref = paper.get(name, {})
        rows.append(f"| {LABELS.get(name, name)} | {_fmt(s['rmse'])} | {_fmt(s['pearson'])} | "
                    f"{_fmt(s['spearman'])} | {_fmt(s['kendall'])} | {_fmt(s.get('log_likelihood'))} | "
                    f"{_fmt(s.get('smooth_ece'))} | {_fmt(ref.get('rmse'))} | {_fmt(ref.get('pearson'))} |")
    sat = ["| method | smECE | Brier | ROC-AUC | log-lik | mean P(sat) |", "|---|---|---|---|---|---|"]
    sat += [f"| {LABELS.get(n, n)} | {_fmt(s['smooth_ece'])} | {_fmt(s['brier'])} | {_fmt(s['roc_auc'])} | "
            f"{_fmt(s['sat_log_likelihood'])} | {_fmt(s['mean_satisfied'])} |"
            for n, s in ev.scores.items() if "smooth_ece" in s]
    dl = ["| method | RMSE | Pearson | Spearman | Kendall |", "|---|---|---|---|---|"]
    dl += [f"| {LABELS.get(n, n)} | {_fmt(s['rmse'])} | {_fmt(s['pearson'])} | {_fmt(s['spearman'])} | "
           f"{_fmt(s['kendall'])} |" for n, s in ev.dialogue_level.items()]
    hp = ", ".join(f"{k}={v}" for k, v in sorted(ev.hyperparameters.items()))
    return "\n".join([
        f"## Calibration of {ev.target} ({ev.protocol})", "",
        f"{ev.scores['llm_rubric']['n']} labels (one per dialogue and annotator). Hyper-parameters: {hp}.",
        "", head, *rows, "",
        "smECE is the smoothed ECE of P(satisfied) = P(answer >= 3); log-lik is the mean held-out "
        "log-likelihood of the true answer.", "",
        f"P(satisfied) = P({ev.target} >= 3) of every method that gives one (log-lik: of satisfied or not; "
        f"observed satisfied rate {np.mean(ev.y >= 3):.3f}):", "",
        *sat, "",
        f"SPUR Appendix D heads: {APPENDIX_D_FEATURES}. The linear head predicts a rating only, the logistic "
        "head P(satisfied) only.", "",
        "Dialogue level (mean prediction vs mean label over each dialogue's annotators):", "", *dl, "",
    ])


def reliability_plot(ev: Evaluation, path: Path | str, *,
                     methods: tuple[str, ...] = ("llm_rubric", "appendix_d_logistic", "calibrated_target_only",
                                                 "judge_expected", "constant_mean")) -> Path:
    """Smoothed reliability curves of P(satisfied), with a histogram of the LLM-Rubric predictions."""
    path = Path(path)
    fig, (ax, hist) = plt.subplots(2, 1, figsize=(5.5, 6.5), height_ratios=(3, 1), sharex=True)
    t = np.linspace(0.0, 1.0, 200)
    outcome = (ev.y >= 3).astype(float)  # the threshold of Outputs.satisfied
    for name in methods:
        f = ev.predictions[name].satisfied if name in ev.predictions else None
        if f is None:
            continue
        density = kernel_smooth(f, np.ones_like(f), 0.05, t)
        residual = kernel_smooth(f, outcome - f, 0.05, t)
        curve = np.where(density > 0.05, t + residual / np.maximum(density, 1e-12), np.nan)
        ax.plot(t, curve, label=f"{LABELS.get(name, name)} (smECE {ev.scores[name]['smooth_ece']:.3f})")
    ax.plot([0, 1], [0, 1], "k:", lw=1, label="perfect calibration")
    ax.set(ylabel="observed P(satisfied)", xlim=(0, 1), ylim=(0, 1),
           title=f"Reliability of P({ev.target} >= 3), {ev.protocol}")
    ax.legend(fontsize=7, loc="upper left")
    hist.hist(ev.predictions["llm_rubric"].satisfied, bins=30, range=(0, 1), color="C0")
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
