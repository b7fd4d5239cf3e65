"""The demo's screen: per-item rates over a recent window beside the run's baseline, the trend,
the distilled classifiers' view, and the shipped DSAT-spike alert as Prometheus evaluates it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from monitor.contracts.rubric_set import RubricSet
from monitor.tools.demo_rates import MIN_CONVERSATIONS, Counts, Rate, RateHistory, sparkline, unscored_total
from monitor.tools.shipped_alerts import AlertState

TREND_STEP_S = 5.0
TREND_WIDTH = 24  # characters: the last two minutes at one character per 5 s
# Highlight a change of at least this factor and this many points (display only; the alert is Prometheus's).
LIFT = 1.5
MIN_POINTS = 0.04


@dataclass(frozen=True)
class View:
    rubric: RubricSet
    judge_name: str
    window_s: float
    spike_at_s: float | None
    spike_factor: float
    retrain_note: str  # how the first model comes about, for the "unscored" explanation
    min_positives: int
    alert_name: str
    alert_where: str  # "<rule file> via Prometheus at <url>" or how to see it when not installed
    log_dir: Path


def _pct(rate: Rate | None) -> str:
    return "-" if rate is None else f"{rate.value:6.1%}"


def _change(base: Rate | None, recent: Rate | None, polarity: str) -> Text:
    """The window over the baseline, bold when it moved by LIFT and MIN_POINTS (worse: red, better: green)."""
    if base is None or recent is None or base.value <= 0:
        return Text("")
    lift = recent.value / base.value
    moved = abs(recent.value - base.value) >= MIN_POINTS and (lift >= LIFT or lift <= 1 / LIFT)
    worse = (lift > 1) == (polarity == "dsat")
    return Text(f"x{lift:.1f}", style=("bold red" if worse else "bold green") if moved else "dim")


def _distilled(history: RateHistory, latest: Counts, item: str, window_s: float) -> tuple[str, str]:
    if latest.scored_distilled == 0 and not latest.dist_n:
        return "no model yet*", ""
    if not latest.dist_n.get(item):
        return "not trained*", ""
    return _pct(history.baseline(item, "distilled", window_s)), _pct(history.window(item, "distilled", window_s))


def _grouped(series: tuple[str, ...]) -> str:
    """"dsat.x (llm)", "dsat.y (distilled)" -> "judge: x · distilled: y": the alert's series, short."""
    groups: dict[str, list[str]] = {}
    for name in series:
        item, _, scorer = name.rpartition(" (")
        label = {"llm": "judge", "distilled": "distilled"}.get(scorer.rstrip(")"), scorer.rstrip(")"))
        groups.setdefault(label, []).append(item.removeprefix("dsat.") if item else name)
    return " · ".join(f"{label}: {', '.join(items)}" for label, items in sorted(groups.items(), reverse=True))


Episodes = Mapping[str, list[tuple[float, tuple[str, ...]]]]  # scorer -> starts of firing runs, with series


def _alert_line(view: View, alert: AlertState | None, fired: Episodes) -> Text:
    line = Text(f"alert {view.alert_name}: ", style="bold")
    if fired:
        when = "; ".join(f"{'judge' if scorer == 'llm' else scorer} at t=" + ", ".join(f"{t:.0f}s" for t, _ in runs)
                         for scorer, runs in sorted(fired.items(), reverse=True))
        line.append(f"fired ({when}); now ", style="bold red")
    if alert is None:
        line.append("not evaluated", style="yellow")
    elif alert.state == "firing":
        line.append("FIRING", style="bold white on red")
        line.append(" on " + _grouped(alert.firing))
        if alert.pending:
            line.append(f"; pending on {_grouped(alert.pending)}")
    elif alert.state == "pending":
        line.append("pending", style="bold yellow")
        line.append(" (condition true, waiting out its for:) on " + _grouped(alert.pending))
    else:
        line.append("inactive", style="green")
    line.append(f"\n  {view.alert_where}", style="dim")
    return line


def render(view: View, history: RateHistory, elapsed: float, alert: AlertState | None,
           dead_letters: float = 0.0, fired: Episodes | None = None) -> Group:
    latest = history.latest or Counts(t=0.0)
    w = view.window_s
    head = Text(f"t={elapsed:4.0f}s  judged [{view.judge_name}] {latest.scored_llm:.0f}  "
                f"distilled {latest.scored_distilled:.0f}  unscored* {unscored_total(latest):.0f}  "
                f"dead letters {dead_letters:.0f}")
    if view.spike_at_s is not None:
        arrived = elapsed >= view.spike_at_s
        head.append(f"\nsimulated DSAT spike: every DSAT pattern x{view.spike_factor:g} from t={view.spike_at_s:.0f}s"
                    + (" (now)" if arrived else ""), style="bold red" if arrived else "dim")
    table = Table(title=f"share of scored conversations showing each pattern: the run's baseline (before the last "
                        f"{w:.0f}s) vs the last {w:.0f}s", title_justify="left")
    table.add_column("item")
    table.add_column("judge baseline", justify="right")
    table.add_column(f"judge last {w:.0f}s", justify="right")
    table.add_column("change", justify="right")
    table.add_column(f"judge trend ({w:.0f}s rate, {TREND_STEP_S:.0f}s steps)")
    table.add_column("distilled baseline", justify="right")
    table.add_column(f"distilled last {w:.0f}s", justify="right")
    for item in view.rubric.items:
        base = history.baseline(item.id, "llm", w)
        recent = history.window(item.id, "llm", w)
        values = [v for _, v in history.series(item.id, "llm", w, TREND_STEP_S)][-TREND_WIDTH:]
        top = max([0.25, *(v for v in values if v is not None)])
        style = "green" if item.polarity == "sat" else "red"
        d_base, d_recent = _distilled(history, latest, item.id, w)
        table.add_row(Text(item.id, style=style), _pct(base), _pct(recent), _change(base, recent, item.polarity),
                      Text(sparkline(values, top), style=style), d_base, d_recent)
    note = Text(
        f"* unscored = conversations the distilled path saw before its first model ({view.retrain_note}).\n"
        f"  not trained = the live model has no classifier for that item yet (under {view.min_positives} "
        f"judge-labelled positives).  - = under {MIN_CONVERSATIONS} scored conversations in that span.",
        style="dim")
    return Group(head, table, note, _alert_line(view, alert, fired or {}))
