"""``bench detect`` at tiny scale: the documented JSON shape, the plot and the report section."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from bench.cli import app
from bench.detect_estimators import ESTIMATORS
from bench.doc import render

runner = CliRunner()


def test_detect_cli_json_plot_and_markdown(shared_data: Path, tmp_path: Path) -> None:
    plot = tmp_path / "bench-detect.png"
    result = runner.invoke(app, ["detect", "--sources", "uss,simulator", "--sim-pool", "300",
                                 "--datasets", "MWOZ", "--limit", "200", "--seeds", "0,1",
                                 "--rates", "0.2", "--factors", "3", "--base-share", "0.2", "--quiet-days", "0.5",
                                 "--history-hours", "6", "--spike-minutes", "60", "--max-training-labels", "300",
                                 "--data", str(shared_data), "--plot", str(plot), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["rule"]["for_minutes"] == 15 and out["rule"]["ratio"] == 1.5  # read from deploy/
    assert out["seeds"] == [0, 1] and out["volume_per_hour"] == 10_000
    uss, sim = out["sources"]
    assert uss["source"] == "uss (MWOZ)" and uss["conversations"] == 200
    assert sim["source"] == "simulator" and sim["conversations"] == 300
    for source in out["sources"]:
        assert [r["estimator"] for r in source["rows"]] == list(ESTIMATORS)
        rows = {r["estimator"]: r for r in source["rows"]}
        for row in rows.values():
            assert row["rate"] == 0.2 and row["3x"]["of"] == 2 and len(row["3x"]["per_seed"]) == 2
            assert row["false_alarms_per_day"]["n"] == 2
        # 20 % -> 60 % with 2,000 judged conversations an hour: the judge slice pages, within the spike
        judge = rows["judge"]["3x"]
        assert judge["detected"] == 2 and 15 < judge["minutes_to_detect"]["max"] <= 60 + 30
        assert 0.85 < rows["ppi"]["quiet_coverage95"]["median"] <= 1.0
        assert rows["distilled_mean"]["quiet_coverage95"]["n"] == 0  # no interval: none claimed
        minutes = 2 * (12 * 60 + (6 * 60 + 60 + 60))  # seeds x (quiet + history, spike and an hour after it)
        assert abs(source["simulated_conversations"] / (minutes * 10_000 / 60) - 1) < 0.01  # Poisson arrivals
    assert sim["model"]["heldout_auc"]["median"] > 0.7  # template sentences: even ~100 labels teach a model
    assert plot.is_file() and plot.stat().st_size > 10_000 and out["plot"] == str(plot)
    doc = render({"detect": out})
    assert "## Spike detection" in doc and "![rates around the spike](bench-detect.png)" in doc
    assert "| 0.2 | judge slice (Hájek) | 2/2 |" in doc and "**simulator**" in doc


def test_detect_cli_refuses_bad_rates() -> None:
    result = runner.invoke(app, ["detect", "--rates", "0,2", "--json", "--quiet"])
    assert result.exit_code == 2 and "--rates must be numbers in (0, 1]" in result.output
    result = runner.invoke(app, ["detect", "--factors", "1", "--json", "--quiet"])
    assert result.exit_code == 2 and "--factors must be numbers above 1" in result.output
    result = runner.invoke(app, ["detect", "--sources", "uss,prod", "--json", "--quiet"])
    assert result.exit_code == 2 and "--sources must name uss and/or simulator" in result.output


def test_detect_on_the_overall_label_trains_the_recipe_it_is_given(shared_data: Path) -> None:
    from bench.use import load_dialogues
    from bench.use_overall import LABELS

    result = runner.invoke(app, ["detect", "--sources", "uss", "--datasets", "MWOZ", "--limit", "300", "--seeds", "0",
                                 "--rates", "0.2", "--factors", "3", "--base-share", "0.2", "--quiet-days", "0.5",
                                 "--history-hours", "6", "--spike-minutes", "60", "--max-training-labels", "300",
                                 "--label", "overall", "--featurizer", "hashing+lexicon",
                                 "--data", str(shared_data), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    (uss,) = out["sources"]
    assert out["label"] == "overall" and out["featurizer"] == "hashing+lexicon"
    assert "OVERALL" in uss["judge"] and "hashing+lexicon featurizer" in uss["model"]["recipe"]
    share = np.mean([LABELS["overall<3"](d) for d in load_dialogues(shared_data, "MWOZ", 300)])
    assert uss["dsat_share"] == round(float(share), 4)
    result = runner.invoke(app, ["detect", "--label", "thumbs", "--json", "--quiet"])
    assert result.exit_code == 2 and "label must be one of spur, overall" in result.output
    result = runner.invoke(app, ["detect", "--featurizer", "hashing+bogus", "--json", "--quiet"])
    assert result.exit_code == 2 and "unknown featurizer 'bogus'" in result.output
