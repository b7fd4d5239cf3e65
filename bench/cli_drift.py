"""``convmon bench drift``: judge drift on anchors vs the rolling z-test vs judge/distilled agreement."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from bench.cli_common import AsJson, Out, Quiet, app, csv_values, emit, progress_lines, run_bench


def drift_table(result: dict[str, Any]) -> Table:
    table = Table("method", "judge change detected", "median h", "spike blamed on judge", "quiet false alarms",
                  "extra judge calls / seed", title=f"bench drift (bars met: {result['bars_met']})")
    for name, m in result["methods"].items():
        hours = m["judge_change_hours_median"]
        table.add_row(name, f"{m['judge_change_detected']}/{m['seeds']}", "—" if hours is None else f"{hours:.0f}",
                      f"{m['spike_blamed_on_judge']}/{m['seeds']}", f"{m['quiet_false_alarms']}/{m['seeds']}",
                      str(m["extra_judge_calls_per_seed"]))
    return table


@app.command()
def drift(
    seeds: Annotated[str, typer.Option(help="Seeds.")] = "0,1,2,3,4,5,6,7,8,9",
    days: Annotated[int, typer.Option(min=15, help="Simulated days per seed and scenario.")] = 70,
    anchors: Annotated[int, typer.Option(min=20, help="Anchors re-judged once a simulated day.")] = 200,
    judge_noise: Annotated[float, typer.Option(min=0.0, max=0.4, help="Share of verdicts the judge flips at "
                                                                     "random on every call.")] = 0.05,
    change_flip: Annotated[float, typer.Option(min=0.01, max=0.5, help="Share of one item's verdicts the judge "
                                                                      "change flips.")] = 0.15,
    change_kind: Annotated[str, typer.Option(help="systematic (the same conversations each call) or random.")]
    = "systematic",
    alpha: Annotated[float, typer.Option(min=1e-6, max=0.49, help="Level of the anchors' test over the rubric.")]
    = 0.01,
    as_json: AsJson = False, out: Out = None, quiet: Quiet = False,
) -> None:
    """Is it the judge or the product? Detection of a judge change, blame for a product spike and false alarms,
    for the anchors' e-processes, the rolling z-test and the judge/distilled agreement detector."""
    from bench.judge_drift import DriftConfig, run_drift
    from monitor.contracts.errors import ConfigError

    def job() -> dict[str, Any]:
        if change_kind not in ("systematic", "random"):
            raise ConfigError(f"--change-kind must be systematic or random. Got {change_kind!r} instead.")
        config = DriftConfig(seeds=[int(v) for v in csv_values(seeds)], days=days, anchors=anchors,
                             judge_noise=judge_noise, change_flip=change_flip, change_kind=change_kind, alpha=alpha)
        return run_drift(config, progress_lines(quiet))

    emit(run_bench(job), as_json, out, drift_table)
