"""The demo's windowed rates (counters differenced over time) and its reading of Prometheus's alerts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from monitor.tools.demo_plot import _spans, plot_rates
from monitor.tools.demo_rates import Counts, RateHistory, counts, parse_families, sparkline
from monitor.tools.demo_view import _grouped
from monitor.tools.shipped_alerts import (
    RULES_DIR,
    alert_state,
    firing_episodes,
    rule_file_of,
    scale_duration,
    scale_expr,
    scaled_rule_files,
)


def snap(t: float, yes: float, n: float, prob: float = 0.0, dn: float = 0.0) -> Counts:
    return Counts(t=t, judge_yes={"dsat.x": yes}, judge_n={"dsat.x": n}, dist_prob={"dsat.x": prob},
                  dist_n={"dsat.x": dn})


def test_counts_reads_the_workers_counters() -> None:
    samples = [
        ("convmon_rubric_verdicts_total", {"rubric": "dsat.x", "scorer": "llm", "verdict": "yes", "app": "web"}, 3.0),
        ("convmon_rubric_verdicts_total", {"rubric": "dsat.x", "scorer": "llm", "verdict": "yes", "app": "api"}, 2.0),
        ("convmon_rubric_verdicts_total", {"rubric": "dsat.x", "scorer": "llm", "verdict": "no", "app": "web"}, 45.0),
        ("convmon_rubric_verdicts_total", {"rubric": "dsat.x", "scorer": "distilled", "verdict": "no"}, 20.0),
        ("convmon_rubric_probability_sum_total", {"rubric": "dsat.x", "scorer": "distilled"}, 1.5),
        ("convmon_conversations_scored_total", {"scorer": "llm", "app": "web"}, 50.0),
        ("convmon_conversations_unscored_total", {"reason": "no_model"}, 7.0),
    ]
    c = counts(samples, 4.0)
    assert c.judge_yes == {"dsat.x": 5.0} and c.judge_n == {"dsat.x": 50.0}
    assert c.dist_prob == {"dsat.x": 1.5} and c.dist_n == {"dsat.x": 20.0}
    assert c.scored_llm == 50.0 and c.scored_distilled == 0.0 and c.unscored == {"no_model": 7.0}


def test_only_the_families_the_demo_reads_are_parsed() -> None:
    text = (
        "# HELP convmon_rubric_verdicts_total Per-item verdicts.\n# TYPE convmon_rubric_verdicts_total counter\n"
        'convmon_rubric_verdicts_total{rubric="dsat.x",scorer="llm",verdict="yes"} 3.0\n'
        'convmon_rubric_verdicts_created{rubric="dsat.x",scorer="llm",verdict="yes"} 1.7e9\n'
        'convmon_judge_requests_total{model="m",status="ok"} 9.0\n'
        'convmon_dead_letters_total{reason="empty"} 2.0\n'
    )
    assert parse_families(text) == [
        ("convmon_rubric_verdicts_total", {"rubric": "dsat.x", "scorer": "llm", "verdict": "yes"}, 3.0),
        ("convmon_dead_letters_total", {"reason": "empty"}, 2.0),
    ]


def test_window_and_baseline_difference_counters_and_show_a_spike() -> None:
    h = RateHistory()
    # 5 % for 60 s (10 conversations a second), then 20 % for 20 s
    for t in range(0, 61, 10):
        h.add(snap(t, yes=0.5 * t, n=10 * t))
    for t in range(70, 81, 10):
        h.add(snap(t, yes=30 + 2.0 * (t - 60), n=10 * t))
    recent = h.window("dsat.x", "llm", 20)
    assert recent is not None and recent.value == pytest.approx(0.20) and recent.n == 200
    base = h.baseline("dsat.x", "llm", 20)  # everything before the last 20 s
    assert base is not None and base.value == pytest.approx(0.05) and base.n == 600
    # the whole-run total would have hidden it: (30 + 40) / 800
    assert h.between(Counts(t=0), h.snapshots[-1], "dsat.x", "llm").value == pytest.approx(70 / 800)
    series = h.series("dsat.x", "llm", 20, 10)
    assert [t for t, _ in series] == [10, 20, 30, 40, 50, 60, 70, 80]
    assert series[5][1] == pytest.approx(0.05) and series[-1][1] == pytest.approx(0.20)
    assert series[6][1] == pytest.approx((5 + 20) / 200)  # half calm, half spike: the spike arriving


def test_window_between_scrapes_uses_the_last_scrape_before_it() -> None:
    h = RateHistory()
    for t, yes, n in ((0.0, 0, 0), (3.3, 1, 30), (7.1, 10, 60)):
        h.add(snap(t, yes, n))
    assert h.at(5.0).t == 3.3 and h.at(-1).t == 0.0
    r = h.window("dsat.x", "llm", 4.0)  # from the scrape at 3.3 (at or before 3.1 is 0.0)
    assert r is not None and r.value == pytest.approx(10 / 60)


def test_too_few_conversations_or_an_unknown_item_gives_no_rate() -> None:
    h = RateHistory()
    h.add(snap(0, 0, 0))
    h.add(snap(5, 1, 9))
    assert h.window("dsat.x", "llm", 5) is None  # 9 < MIN_CONVERSATIONS
    assert h.window("dsat.other", "llm", 5) is None
    assert RateHistory().window("dsat.x", "llm", 5) is None and RateHistory().baseline("dsat.x", "llm", 5) is None


def test_distilled_rate_is_the_probability_sum_over_its_verdicts() -> None:
    h = RateHistory()
    h.add(snap(0, 0, 0, prob=0.0, dn=0))
    h.add(snap(10, 0, 0, prob=3.0, dn=40))
    r = h.window("dsat.x", "distilled", 10)
    assert r is not None and r.value == pytest.approx(3 / 40)


def test_a_worker_restart_counts_the_new_values_as_increase() -> None:
    h = RateHistory()
    h.add(snap(0, 50, 500))
    h.add(snap(10, 2, 20))  # counters went down: the worker restarted
    r = h.window("dsat.x", "llm", 10)
    assert r is not None and r.value == pytest.approx(0.1) and r.n == 20


def test_snapshots_out_of_order_are_refused() -> None:
    h = RateHistory()
    h.add(snap(5, 0, 0))
    with pytest.raises(ValueError):
        h.add(snap(4, 0, 0))


def test_sparkline_scales_to_top_and_leaves_gaps() -> None:
    assert sparkline([0.0, 0.1, None, 0.2], top=0.2) == "▁▅ █"
    assert sparkline([0.5], top=0.2) == "█"


ALERTS = [
    {"labels": {"alertname": "ConvmonDsatSpike", "rubric": "dsat.repetition", "scorer": "llm", "polarity": "dsat",
                "severity": "page"}, "state": "firing", "value": "1.8e-01"},
    {"labels": {"alertname": "ConvmonDsatSpike", "rubric": "dsat.irrelevance", "scorer": "llm"}, "state": "pending",
     "value": "0.15"},
    {"labels": {"alertname": "ConvmonWorkerDown", "instance": "w1"}, "state": "firing", "value": "0"},
]


def test_alert_state_reads_prometheus_alerts() -> None:
    s = alert_state(ALERTS, "ConvmonDsatSpike")
    assert s.state == "firing"
    assert s.firing == ("dsat.repetition (llm)",) and s.pending == ("dsat.irrelevance (llm)",)
    assert s.values["dsat.repetition (llm)"] == pytest.approx(0.18)
    pending = alert_state(ALERTS[1:], "ConvmonDsatSpike")
    assert pending.state == "pending" and pending.firing == ()
    assert alert_state(ALERTS[2:], "ConvmonDsatSpike").state == "inactive"
    assert alert_state(ALERTS, "ConvmonWorkerDown").firing == ("instance=w1",)


def test_scaling_divides_every_duration_and_keeps_the_rest() -> None:
    assert scale_duration("30m", 90) == "20000ms" and scale_duration("1h30m", 60) == "90000ms"
    expr = 'sum(rate(x{a=~"[a-z]+"}[30m])) / avg_over_time(y[7d:1h]) + z offset 1h + max_over_time(w[1d:])'
    assert scale_expr(expr, 60) == ('sum(rate(x{a=~"[a-z]+"}[30000ms])) / avg_over_time(y[10080000ms:60000ms])'
                                    ' + z offset 60000ms + max_over_time(w[1440000ms:])')


def test_the_shipped_alert_is_found_by_name_and_scaled_as_shipped(tmp_path: Path) -> None:
    path = rule_file_of("ConvmonDsatSpike")
    assert path.parent == RULES_DIR
    shipped = {r.get("alert"): r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]}
    scaled_path = next(p for p in scaled_rule_files(tmp_path, 90) if p.name == path.name)
    scaled = {r.get("alert"): r for g in yaml.safe_load(scaled_path.read_text())["groups"] for r in g["rules"]}
    spike, ours = shipped["ConvmonDsatSpike"], scaled["ConvmonDsatSpike"]
    assert ours["expr"] == scale_expr(spike["expr"], 90)  # the same expression, durations aside
    assert ours["labels"] == spike["labels"]
    with pytest.raises(Exception, match="no rule file"):
        rule_file_of("NoSuchAlert")


def test_alert_state_per_scorer() -> None:
    s = alert_state(ALERTS, "ConvmonDsatSpike")
    assert s.for_scorer("llm").state == "firing"
    assert s.for_scorer("distilled").state == "inactive" and s.for_scorer("distilled").firing == ()
    assert alert_state(ALERTS[1:], "ConvmonDsatSpike").for_scorer("llm").pending == ("dsat.irrelevance (llm)",)


def test_alert_spans_merge_consecutive_states() -> None:
    timeline = [(0.0, "inactive"), (5.0, "pending"), (6.0, "pending"), (9.0, "firing"), (12.0, "inactive"),
                (14.0, "firing")]
    assert _spans(timeline, end=20.0) == [(5.0, 9.0, "pending"), (9.0, 12.0, "firing"), (14.0, 20.0, "firing")]


def test_alert_series_are_grouped_by_scorer_for_the_screen() -> None:
    assert _grouped(("dsat.a (llm)", "dsat.b (distilled)", "dsat.c (llm)")) == "judge: a, c · distilled: b"
    assert _grouped(("dsat.a (llm)", "dsat.b (corrected)")) == "judge: a · corrected: b"


def test_two_alerts_read_together_are_told_apart_by_their_scorer() -> None:
    """The demo watches ConvmonDsatSpikeCorrected (scorer="corrected") and ConvmonDsatSpike as one state."""
    corrected = {"labels": {"alertname": "ConvmonDsatSpikeCorrected", "rubric": "dsat.topic_switch",
                            "scorer": "corrected", "polarity": "dsat"}, "state": "firing", "value": "0.2"}
    both = alert_state([*ALERTS, corrected], "ConvmonDsatSpikeCorrected", "ConvmonDsatSpike")
    assert both.firing == ("dsat.repetition (llm)", "dsat.topic_switch (corrected)")
    assert both.for_scorer("corrected").firing == ("dsat.topic_switch (corrected)",)
    assert both.for_scorer("llm").pending == ("dsat.irrelevance (llm)",)
    assert alert_state([corrected], "ConvmonDsatSpike").state == "inactive"
    assert firing_episodes([(0.0, alert_state([], "x")), (7.0, both)], "corrected") == [
        (7.0, ("dsat.topic_switch (corrected)",))]


def test_the_plot_is_a_png_with_the_rates(tmp_path: Path) -> None:
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.contracts.settings import Settings

    settings = Settings()
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    h = RateHistory()
    for t in range(0, 61, 2):
        yes = 0.5 * t if t < 30 else 15 + 2.0 * (t - 30)  # 5 % of 10 a second, then 20 %
        h.add(Counts(t=t, judge_yes={i.id: yes for i in rubric.items}, judge_n={i.id: 10.0 * t for i in rubric.items}))
    firing = alert_state(ALERTS, "ConvmonDsatSpike")
    path = plot_rates(tmp_path / "rates.png", h, rubric, window_s=10, step_s=5, spike_at_s=30,
                      alert_name="ConvmonDsatSpike", alert_timeline=[(0.0, alert_state([], "x")), (45.0, firing)],
                      judge_name="simulated")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000


def test_without_prometheus_the_demo_says_how_to_see_the_alert(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    from monitor.tools import demo

    monkeypatch.setattr(demo, "prometheus_binary", lambda: None)
    prom, where = demo._start_prometheus(tmp_path, "127.0.0.1:1", 120)
    assert prom is None
    shipped = str(rule_file_of("ConvmonDsatSpike").relative_to(RULES_DIR.parents[2]))
    assert "prometheus is not installed" in where and shipped in where
    assert "apt-get install prometheus" in where and "http://localhost:9090/alerts" in where


def test_firing_episodes_are_the_starts_of_firing_runs() -> None:
    quiet, firing = alert_state([], "ConvmonDsatSpike"), alert_state(ALERTS, "ConvmonDsatSpike")
    timeline = [(0.0, quiet), (3.0, firing), (4.0, firing), (6.0, quiet), (9.0, firing)]
    assert firing_episodes(timeline, "llm") == [(3.0, ("dsat.repetition (llm)",)), (9.0, ("dsat.repetition (llm)",))]
    assert firing_episodes(timeline, "distilled") == []


def test_the_demo_waits_for_a_judge_still_behind_the_simulator() -> None:
    """The alert counts the judge's verdicts: a demo that stopped once the hot path had every conversation,
    with the judge's backlog of the spike undelivered, ended before the rule could see it (CI, 2026-11-28)."""
    from monitor.tools.demo import MAX_TAIL_S, DemoResult, _finished
    from monitor.tools.simulator.run import SimulationStats

    result, stats = DemoResult(RateHistory()), SimulationStats(conversations=10)

    def at(t: float, lag: float) -> bool:
        result.history.add(Counts(t=t, scored_distilled=10.0, lag=lag))
        return _finished(result, stats, t)

    assert [at(t, lag) for t, lag in ((3.0, 40.0), (5.0, 0.0), (7.0, 0.0), (8.0, 0.0))] == [False] * 3 + [True]
    assert _finished(DemoResult(RateHistory()), stats, MAX_TAIL_S)  # bounded


def test_the_demo_judges_a_quarter_and_watches_shipped_alerts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The distilled path carries most of the traffic, as in production, and the alerts on screen are shipped ones."""
    from monitor.contracts.settings import Settings
    from monitor.tools.demo import ALERTS, _worker_env

    monkeypatch.delenv("CONVMON_SAMPLE_RATE", raising=False)
    env = _worker_env("kafka://127.0.0.1:1", tmp_path, 9100)
    for key, value in env.items():
        if key.startswith("CONVMON_"):
            monkeypatch.setenv(key, value)
    settings = Settings()
    assert settings.sample_rate <= 0.25 and settings.active_learning_rate == 0.0
    assert settings.metric_dimensions == ["app"]
    for alert in ALERTS.values():
        assert rule_file_of(alert).parent == RULES_DIR
