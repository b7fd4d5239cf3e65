"""``bench cost`` at tiny scale: the documented JSON shape, exact judge-all rows, the report section and the plot."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from bench.cli import app
from bench.doc_markdown import cost_markdown

runner = CliRunner()


def test_cost_cli_json_plot_and_markdown(shared_data: Path, tmp_path: Path) -> None:
    plot = tmp_path / "cost.png"
    result = runner.invoke(app, ["cost", "--volume", "1000", "--slices", "1,0.1", "--windows", "10",
                                 "--sim-pool", "200", "--max-training-labels", "400", "--data", str(shared_data),
                                 "--volumes", "1000,100000", "--plot", str(plot), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["volume_per_hour"] == 1000 and [s["source"] for s in out["sources"]] == ["simulator", "uss"]
    simulator, uss = out["sources"]
    assert simulator["items"] == 20 and uss["items"] == 1
    for source in out["sources"]:
        full, tenth = source["rows"]
        assert (full["slice"], tenth["slice"]) == (1.0, 0.1)
        assert full["judge_only_p95_max_points"] == 0.0 and full["ppi_p95_max_points"] < 1e-9  # judging everything
        assert tenth["judge_only_p95_max_points"] > 0 and tenth["usd_per_million"] < full["usd_per_million"]
        assert 0 < source["spend"]["usd_per_million_judged"] < 10_000
        assert source["smallest_slice_within_tolerance"]["judge_only"] in (1.0, 0.1)
        assert tenth["ppi_tuned_p95_max_points"] > 0 and full["ppi_tuned_p95_max_points"] < 1e-9
        small, large = source["by_volume"]
        assert (small["volume_per_hour"], large["volume_per_hour"]) == (1000, 100_000)
        # 100x the volume judges 100x more per hour: the 10 % slice's judge-only error shrinks about 10x
        assert large["p95_max_points"]["judge_only"]["0.1"] < small["p95_max_points"]["judge_only"]["0.1"] / 4
    assert plot.stat().st_size > 10_000
    markdown = cost_markdown(out)
    assert "Smallest slice keeping every rate within ±1 point at 95 %" in markdown and "| 10.0% |" in markdown
    assert "Smallest slice within ±1 point by volume" in markdown and "| 100,000 |" in markdown


def test_cost_cli_refuses_bad_slices() -> None:
    result = runner.invoke(app, ["cost", "--slices", "0,2", "--json", "--quiet"])
    assert result.exit_code == 2 and "--slices must be numbers in (0, 1]" in result.output


def test_sampler_gain_spends_the_same_in_both_arms(shared_data: Path) -> None:
    from bench.doc_markdown import sampler_markdown
    from bench.sampler_gain import SamplerConfig, run_sampler

    out = run_sampler(SamplerConfig(rate=0.3, rounds=2, seeds=(0,), uss_files=("MWOZ",), data_dir=shared_data))
    [run] = out["runs"]
    assert run["labels"] > 0 and 0.5 < run["auc_hash_only"] <= 1 and 0.5 < run["auc_uncertainty"] <= 1
    assert abs(run["gain"] - (run["auc_uncertainty"] - run["auc_hash_only"])) < 2e-4
    assert run["positives_uncertainty"] >= run["positives_hash_only"] * 0.8  # boosted picks are not all negatives
    assert "equal judge spend" in sampler_markdown(out)
