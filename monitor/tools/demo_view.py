"""The demo's screen: per-item rates over a recent window beside the run's baseline, the trend,
the distilled classifiers' view, and the shipped DSAT-spike alert as Prometheus evaluates it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from monitor.contracts.rubric_set import RubricSet
from monitor.tools.demo_rates import MIN_CONVERSATIONS, Counts, Rate, RateHistory, sparkline, unscored_total
from monitor.tools.shipped_alerts import AlertState

TREND_STEP_S = 5.0
TREND_WIDTH = 24  # characters: the last two minutes at one character per 5 s
MIN_TREND = 8  # a narrower trend is left out
FIXED_COLUMNS_WIDTH = 50  # every column but the item and the trend, with the padding between columns
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


def _distilled(history: RateHistory, latest: Counts, item: str, window_s: float,
               spike_at_s: float | None) -> tuple[str, str]:
    if latest.scored_distilled == 0 and not latest.dist_n:
        return "no model*", ""
    if not latest.dist_n.get(item):
        return "untrained*", ""
    return (_pct(history.baseline(item, "distilled", window_s, until=spike_at_s)),
            _pct(history.window(item, "distilled", window_s)))


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


@dataclass(frozen=True)
class Health:
    """What can hide the headline: a worker behind its input, scrapes that failed (the demo's own, Prometheus's)."""

    lag: float = 0.0
    failed_scrapes: int = 0
    prometheus_failed_scrapes: int | None = None  # None: no Prometheus


LAG_WARN = 200  # messages behind: the rates on screen lag the simulator noticeably


def _health_line(health: Health) -> Text:
    line = Text(f"  worker lag {health.lag:.0f} msgs", style="bold yellow" if health.lag >= LAG_WARN else "dim")
    if health.lag >= LAG_WARN:
        line.append(" (behind: the rates trail the simulator; a busy machine)", style="yellow")
    failed = health.failed_scrapes + (health.prometheus_failed_scrapes or 0)
    where = f"demo {health.failed_scrapes}" + (f", Prometheus {health.prometheus_failed_scrapes}"
                                               if health.prometheus_failed_scrapes is not None else "")
    line.append(f"  failed scrapes: {where}", style="bold yellow" if failed else "dim")
    return line


def render(view: View, history: RateHistory, elapsed: float, alert: AlertState | None,
           dead_letters: float = 0.0, fired: Episodes | None = None, health: Health | None = None,
           width: int | None = None) -> Group:
    """The screen; ``width`` is the terminal's (the trend column shrinks or goes to fit it)."""
    latest = history.latest or Counts(t=0.0)
    w = view.window_s
    head = Text(f"t={elapsed:4.0f}s  judged [{view.judge_name}] {latest.scored_llm:.0f}  "
                f"distilled {latest.scored_distilled:.0f}  unscored* {unscored_total(latest):.0f}  "
                f"dead letters {dead_letters:.0f}")
    head.append_text(_health_line(health or Health(lag=latest.lag)))
    if view.spike_at_s is not None:
        arrived = elapsed >= view.spike_at_s
        head.append(f"\nsimulated DSAT spike: every DSAT pattern x{view.spike_factor:g} from t={view.spike_at_s:.0f}s"
                    + (" (now)" if arrived else ""), style="bold red" if arrived else "dim")
    before = (f"before the last {w:.0f}s" if view.spike_at_s is None
              else f"before the last {w:.0f}s and the spike at t={view.spike_at_s:.0f}s")
    table = Table(title=f"share of scored conversations showing each pattern: baseline ({before}) vs the last "
                        f"{w:.0f}s", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    # The item column never wraps or truncates (two rows reading `dsat.lac…` are useless): the trend gets what
    # the terminal has left, up to TREND_WIDTH, and is left out when that is too little to read.
    item_w = max(len(i.id) for i in view.rubric.items)
    trend_w = min(TREND_WIDTH, (width or 200) - item_w - FIXED_COLUMNS_WIDTH)
    table.add_column("item", no_wrap=True, min_width=item_w)
    for header in ("judge\nbase", f"judge\n{w:.0f}s", "chg"):
        table.add_column(header, justify="right", no_wrap=True)
    if trend_w >= MIN_TREND:
        table.add_column(f"trend\n{TREND_STEP_S:.0f}s steps", no_wrap=True, width=trend_w)
    for header in ("dist.\nbase", f"dist.\n{w:.0f}s"):
        table.add_column(header, justify="right", no_wrap=True)
    for item in view.rubric.items:
        base = history.baseline(item.id, "llm", w, until=view.spike_at_s)
        recent = history.window(item.id, "llm", w)
        style = "green" if item.polarity == "sat" else "red"
        d_base, d_recent = _distilled(history, latest, item.id, w, view.spike_at_s)
        cells: list[Text | str] = [Text(item.id, style=style), _pct(base), _pct(recent),
                                   _change(base, recent, item.polarity)]
        if trend_w >= MIN_TREND:
            values = [v for _, v in history.series(item.id, "llm", w, TREND_STEP_S)][-trend_w:]
            top = max([0.25, *(v for v in values if v is not None)])
            cells.append(Text(sparkline(values, top), style=style))
        table.add_row(*cells, d_base, d_recent)
    note = Text(
        f"* unscored = conversations the distilled path saw before its first model; no model = none yet "
        f"({view.retrain_note}).\n"
        f"  untrained = the live model has no classifier for that item yet (under {view.min_positives} "
        f"judge-labelled positives).  - = under {MIN_CONVERSATIONS} scored conversations in that span.",
        style="dim")
    return Group(head, table, note, _alert_line(view, alert, fired or {}))
