"""`bench throughput`'s CPU per conversation: median and range over alternated rounds, and its table."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bench.doc_markdown import throughput_markdown
from bench.throughput import ThroughputConfig
from bench.throughput_cpu import MODES, PATHS, cpu_markdown, round_ratios, run_cpu_rounds, spread
from bench.worker_source import WorkerSource, worker_code
from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import REPO_ROOT


def test_spread_is_the_median_and_range_of_the_rounds() -> None:
    assert spread([5.0, 1.0, 3.0]) == {"median": 3.0, "min": 1.0, "max": 5.0, "rounds": [5.0, 1.0, 3.0]}
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        run_cpu_rounds(ThroughputConfig(), 0)


def _result() -> dict[str, Any]:
    cpu = {"turns": {"raw_consume": spread([100.0, 120.0, 95.0]), "monitor": spread([5000.0, 6000.0, 5500.0])},
           "conversations": {p: spread([10.0, 20.0, 30.0]) for p in PATHS}}
    per_s = {m: {p: spread([1.0, 2.0, 3.0]) for p in PATHS} for m in MODES}
    return {"cpu_us_per_conversation": cpu,
            "cpu_rounds": {"rounds": 3, "featurizer": "hashing", "worker_processes": 2, "order": "per round: x",
                           "conversations": {"turns": 300, "conversations": 300}, "per_s": per_s,
                           "raw_to_monitor_cpu": {"turns": spread([0.02, 0.019, 0.018]),
                                                  "conversations": spread([1.0, 1.0, 1.0])}}}


def test_the_table_shows_median_range_and_the_raw_to_monitor_ratio() -> None:
    text = cpu_markdown(_result())
    assert "| turns | monitor | 5500 [5000-6000] | 2.0 [1.0-3.0] |" in text
    assert "| turns | raw_consume | 100 [95-120] |" in text
    assert "turns 1.90 % [1.80-2.00]" in text and "3 alternated rounds per variant" in text
    assert text in throughput_markdown({"monitor_per_s": {}, "ratio": {}, **_result()})


@pytest.mark.long
@pytest.mark.timeout(900)  # 207 s on the shared 2-core machine under nice -n 10: 4 worker starts, 2 brokers' worth
def test_every_path_on_both_inputs_in_one_run(shared_data: Path) -> None:
    config = ThroughputConfig(conversations=30, workers=1, warmup=5, featurizers=["hashing"], train_labels=200,
                              data_dir=shared_data, timeout_s=300)
    out = run_cpu_rounds(config, 1)
    cpu = out["cpu_us_per_conversation"]
    assert set(cpu) == set(MODES) and all(set(paths) == set(PATHS) for paths in cpu.values())
    for mode in MODES:
        assert 0 < cpu[mode]["raw_consume"]["median"] < cpu[mode]["monitor"]["median"]
        assert 0 < out["cpu_rounds"]["raw_to_monitor_cpu"][mode]["median"] < 1
        assert out["cpu_rounds"]["per_s"][mode]["monitor"]["median"] > 0
    assert out["cpu_rounds"]["conversations"] == {"turns": 30, "conversations": 30}


def test_a_baseline_adds_its_rows_and_the_ratio_to_this_checkouts_monitor() -> None:
    result = _result()
    for mode in MODES:
        result["cpu_us_per_conversation"][mode]["baseline"] = spread([6000.0, 6600.0, 7150.0])
    ratio = round_ratios([6000.0, 6600.0, 7150.0], [5000.0, 6000.0, 5500.0])
    result["cpu_rounds"]["baseline_to_monitor_cpu"] = {m: ratio for m in MODES}
    result["cpu_rounds"]["per_s"] = {m: {p: spread([1.0]) for p in (*PATHS, "baseline")} for m in MODES}
    result["cpu_rounds"]["worker_code"] = {"monitor": {"commit": "abc1234"},
                                           "baseline": {"commit": "198e016", "checkout": "/b"}}
    text = cpu_markdown(result)
    assert "| turns | baseline | 6600 [6000-7150] |" in text
    assert "The baseline (198e016, /b)'s CPU per conversation / this checkout's monitor's (abc1234): " \
           "turns 1.20x [1.10-1.30]" in text


def test_an_older_worker_gets_only_the_settings_every_release_knows() -> None:
    older, this = WorkerSource(older=True).settings_filter(), WorkerSource().settings_filter()
    assert older("CONVMON_BROKER_URL") and older("CONVMON_METRICS_PORT")
    assert not older("CONVMON_CLASSIFY_BATCH") and this("CONVMON_CLASSIFY_BATCH")


def test_the_worker_code_check_refuses_a_checkout_that_would_import_another_monitor(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(REPO_ROOT)}
    assert worker_code(REPO_ROOT, env)["monitor_cli_file"] == str(REPO_ROOT / "monitor" / "cli.py")
    with pytest.raises(ConfigError, match="would import monitor.cli from"):
        worker_code(tmp_path, env)  # no monitor/ there: PYTHONPATH's is found
