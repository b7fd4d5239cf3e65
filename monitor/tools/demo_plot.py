"""The demo's closing picture: per-item rates over time, the spike and the alert's state."""

from __future__ import annotations

from pathlib import Path

from monitor.contracts.rubric_set import RubricSet
from monitor.tools.demo_rates import RateHistory
from monitor.tools.shipped_alerts import AlertState

STATE_COLOURS = {"pending": "#f5c542", "firing": "#d62728"}


def _spans(timeline: list[tuple[float, str]], end: float) -> list[tuple[float, float, str]]:
    """Consecutive (start, stop, state) runs of a state timeline, inactive ones left out."""
    spans: list[tuple[float, float, str]] = []
    for i, (t, state) in enumerate(timeline):
        stop = timeline[i + 1][0] if i + 1 < len(timeline) else end
        if state in STATE_COLOURS:
            if spans and spans[-1][2] == state and spans[-1][1] == t:
                spans[-1] = (spans[-1][0], stop, state)
            else:
                spans.append((t, stop, state))
    return spans


def alert_caption(alert_timeline: list[tuple[float, AlertState]], alert_name: str, shaded: bool) -> str:
    """What the plot says about the alert: shading is promised only when some is drawn."""
    if shaded:
        return (f"shaded: {alert_name} pending (yellow) / firing (red) in Prometheus, on that panel's scorer's "
                "series (the distilled panel: the corrected rate's)")
    if not alert_timeline:
        return f"{alert_name} not evaluated (no Prometheus ran): no alert shading"
    return f"{alert_name} was evaluated by Prometheus and never pending or firing"


def plot_rates(path: Path, history: RateHistory, rubric: RubricSet, *, window_s: float, step_s: float,
               spike_at_s: float | None, alert_name: str, alert_timeline: list[tuple[float, AlertState]],
               judge_name: str) -> Path:
    """Write a PNG: judge DSAT items, distilled DSAT items, judge SAT items, each a windowed rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # (polarity, scorer of the rates, scorer of the alert series shaded, title): the distilled panel shades the
    # alert on the corrected rate, the distilled mean corrected by the judged slice
    panels = [("dsat", "llm", "llm", f"DSAT items, judge ({judge_name})"),
              ("dsat", "distilled", "corrected", "DSAT items, distilled classifiers (expected rate)"),
              ("sat", "llm", "llm", f"SAT items, judge ({judge_name})")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 11), sharex=True)
    shaded = False
    end = history.latest.t if history.latest else 0.0
    cmap = plt.get_cmap("tab10")
    for ax, (polarity, scorer, alert_scorer, title) in zip(axes, panels, strict=True):
        items = [i for i in rubric.items if i.polarity == polarity]
        by_time: dict[float, list[float]] = {}
        for n, item in enumerate(items):
            points = [(t, v) for t, v in history.series(item.id, scorer, window_s, step_s) if v is not None]
            if points:
                ts, vs = zip(*points, strict=True)
                ax.plot(ts, [100 * v for v in vs], color=cmap(n % 10), linewidth=1.1, alpha=0.8, label=item.id)
                for t, v in points:
                    by_time.setdefault(t, []).append(v)
        if by_time:
            times = sorted(by_time)
            ax.plot(times, [100 * sum(by_time[t]) / len(by_time[t]) for t in times], color="black", linewidth=2.6,
                    label=f"mean of {polarity.upper()} items")
        states = [(t, alert.for_scorer(alert_scorer).state) for t, alert in alert_timeline]
        for start, stop, state in _spans(states, end):
            ax.axvspan(start, stop, color=STATE_COLOURS[state], alpha=0.18, linewidth=0)
            shaded = True
        if spike_at_s is not None:
            ax.axvline(spike_at_s, color="black", linestyle="--", linewidth=1)
            ax.annotate("spike starts", (spike_at_s, 1), xycoords=("data", "axes fraction"),
                        xytext=(4, -12), textcoords="offset points", fontsize=9)
        ax.set_title(title, loc="left", fontsize=11)
        ax.set_ylabel(f"% of conversations\n(last {window_s:.0f}s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        else:
            ax.text(0.5, 0.5, "no data (no model was live)", transform=ax.transAxes, ha="center", color="grey")
    axes[-1].set_xlabel("seconds since the simulator started")
    caption = alert_caption(alert_timeline, alert_name, shaded)
    fig.suptitle(f"convmon demo: per-item rates over a {window_s:.0f}s window\n{caption}", fontsize=12)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
