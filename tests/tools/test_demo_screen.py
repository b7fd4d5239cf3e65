"""The demo's screen and plot say what is true: the baseline leaves the spike out, every item name is whole in an
80-column terminal, a lagging worker and failed scrapes show, the plot promises no shading it did not draw, and the
summary starts on a line of its own after the live screen."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.runtime.broker import free_port
from monitor.tools import demo
from monitor.tools.demo_plot import alert_caption
from monitor.tools.demo_rates import Counts, RateHistory, counts, parse_families
from monitor.tools.demo_view import Health, View, render
from monitor.tools.local_prometheus import LocalPrometheus
from monitor.tools.shipped_alerts import alert_state
from monitor.tools.simulator.run import SimulationStats

RUBRIC = load_rubric_set(Settings().rubric_set, Settings().prompts_dir)


def spiked_history(spike_at: int = 50, end: int = 100) -> RateHistory:
    """10 % yes before the spike, 40 % after, 3 conversations a second."""
    h = RateHistory()
    yes = 0.0
    for t in range(end + 1):
        yes += 0.3 if t <= spike_at else 1.2
        h.add(Counts(t=float(t), judge_yes={i.id: yes for i in RUBRIC.items},
                     judge_n={i.id: 3.0 * t for i in RUBRIC.items}, scored_llm=3.0 * t))
    return h


def test_the_baseline_ends_where_the_spike_starts() -> None:
    h = spiked_history()
    item = RUBRIC.items[0].id
    assert abs(h.baseline(item, "llm", 20.0, until=50.0).value - 0.1) < 0.01  # type: ignore[union-attr]
    assert h.baseline(item, "llm", 20.0).value > 0.15  # type: ignore[union-attr]  # the spike leaks in without it
    assert abs(h.window(item, "llm", 20.0).value - 0.4) < 0.01  # type: ignore[union-attr]


def view() -> View:
    return View(rubric=RUBRIC, judge_name="simulated", window_s=20, spike_at_s=50, spike_factor=4,
                retrain_note="no model yet", min_positives=5, alert_name="ConvmonDsatSpike", alert_where="here",
                log_dir=Path("."))


def screen(width: int, health: Health) -> str:
    console = Console(width=width, color_system=None)
    with console.capture() as capture:
        console.print(render(view(), spiked_history(), 100.0, None, health=health, width=width))
    return capture.get()


def test_every_item_name_is_whole_and_the_table_fits_80_columns() -> None:
    for width in (80, 120):
        text = screen(width, Health())
        assert max(len(line) for line in text.splitlines()) <= width
        rows = [line.split()[0] for line in text.splitlines() if line.strip().startswith(("sat.", "dsat."))]
        assert rows == [i.id for i in RUBRIC.items]
    assert "█" in screen(120, Health()) and "█" not in screen(80, Health())  # the trend goes first
    assert "before the last 20s and the spike at t=50s" in " ".join(screen(120, Health()).split())


def test_the_legend_explains_every_mark_the_screen_shows() -> None:
    import re

    text = " ".join(screen(120, Health()).split())
    legend = text[text.index("* unscored ="):]
    marks = set(re.findall(r"([a-z][a-z ]*?)\*", text.replace(legend, "")))
    assert marks == {"unscored", "no model"}  # no distilled model in this history
    for mark in (*marks, "untrained"):  # an item without a classifier reads "untrained*"
        assert f"{mark} =" in legend, mark


def test_lag_and_failed_scrapes_are_shown() -> None:
    quiet = screen(120, Health(lag=3, failed_scrapes=0, prometheus_failed_scrapes=0))
    assert "worker lag 3 msgs" in quiet and "behind" not in quiet
    busy = screen(120, Health(lag=5000, failed_scrapes=2, prometheus_failed_scrapes=167))
    assert "worker lag 5000 msgs (behind" in busy and "failed scrapes: demo 2, Prometheus 167" in busy
    samples = parse_families('convmon_consumer_lag_messages{topic="t.events"} 40.0\n'
                             'convmon_consumer_lag_messages{topic="t.judge"} 2.0\n')
    assert counts(samples, 0.0).lag == 42.0


def test_the_plot_caption_promises_shading_only_when_drawn() -> None:
    assert "not evaluated" in alert_caption([], "A", shaded=False) and "shaded" not in alert_caption([], "A", False)
    quiet = [(0.0, alert_state([], "A"))]
    assert alert_caption(quiet, "A", shaded=False) == "A was evaluated by Prometheus and never pending or firing"
    assert alert_caption(quiet, "A", shaded=True).startswith("shaded: A pending (yellow) / firing (red)")


def test_the_demo_prometheus_sets_its_scrape_timeout(tmp_path: Path) -> None:
    prom = LocalPrometheus("prometheus", tmp_path, [f"127.0.0.1:{free_port()}"], 120.0)
    try:
        prom.start(timeout=0.01)  # writes the config; whether the binary exists does not matter here
    except Exception:  # noqa: BLE001 - a missing binary or a slow start: the config is what is checked
        pass
    finally:
        prom.stop()
    config = yaml.safe_load((tmp_path / "prometheus.yml").read_text())
    assert config["global"]["scrape_timeout"] == config["global"]["scrape_interval"] == "1000ms"


def test_the_summary_starts_on_its_own_line_after_the_live_screen(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    # Written to a pipe (CI, `make demo | tee`), the live screen ends without a newline: the summary's first line
    # once ran on from the screen's last ("... unit testssimulated 300 conversations ...").
    out = io.StringIO()
    monkeypatch.setattr(demo, "console", Console(file=out, width=120, color_system=None))
    assert not demo.console.is_terminal
    history = spiked_history()
    with demo._live_screen() as live:
        live.update(render(view(), history, 100.0, None, health=Health(), width=120), refresh=True)
    screen_end = out.getvalue()
    assert not screen_end.endswith("\n")  # what the summary must cope with
    result = demo.DemoResult(history=history, simulated=SimulationStats(conversations=300, events=900,
                                                                        spiked_conversations=150))
    demo._summary(result, RUBRIC, view(), tmp_path)
    lines = out.getvalue().splitlines()
    assert "simulated 300 conversations (150 after the spike at t=50s), 900 events" in lines
    assert screen_end.splitlines()[-1] in lines  # the screen's last line is whole too
