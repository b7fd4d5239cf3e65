"""`bench latency`: end event's produce time to the distilled score's timestamp, at a paced rate."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.latency import (
    LatencyConfig,
    histogram_quantile_le,
    latency_rows,
    latency_summary,
    paced_schedule,
    run_latency,
)
from bench.throughput_input import uss_dialogues
from distill.datasets import UssDialogue
from monitor.contracts.errors import ConfigError
from monitor.runtime.scrape import Sample


def test_latency_is_score_time_minus_end_time_with_missing_ids_named() -> None:
    produced = {"a": 100.0, "b": 101.0, "c": 102.0, "d": 103.0}
    scored = {"a": 100.5, "b": 103.0, "d": 103.25, "warm-1": 50.0}  # c never scored; warm-1 was not produced
    out = latency_summary(produced, scored)
    assert (out["conversations"], out["scored"], out["missing"], out["missing_ids"]) == (4, 3, 1, ["c"])
    assert out["p50_s"] == 0.5 and out["max_s"] == 2.0 and out["min_s"] == 0.25
    assert out["p99_s"] == pytest.approx(0.5 + 1.5 * 0.98)  # between the two largest, linearly
    assert out["mean_s"] == pytest.approx(2.75 / 3)


def test_nothing_scored_has_no_percentiles_and_every_id_missing() -> None:
    out = latency_summary({"b": 1.0, "a": 2.0}, {})
    assert out == {"conversations": 2, "scored": 0, "missing": 2, "missing_ids": ["a", "b"]}


def _dialogues(shared_data: Path) -> tuple[UssDialogue, ...]:
    return uss_dialogues(shared_data)


def test_the_schedule_paces_conversations_and_ends_each_after_its_turns(shared_data: Path) -> None:
    schedule = paced_schedule(_dialogues(shared_data), 30, rate=10.0, spread_s=2.0, seed=1, prefix="p")
    assert [s.at for s in schedule] == sorted(s.at for s in schedule)
    ends = {s.event["conversation_id"]: s for s in schedule if s.end}
    assert len(ends) == 30 and ends["p-0"].at == 2.0 and ends["p-29"].at == pytest.approx(2.9 + 2.0)
    for cid, end in ends.items():
        turns = [s for s in schedule if not s.end and s.event["conversation_id"] == cid]
        assert [t.event["turn_index"] for t in turns] == list(range(end.event["turn_count"]))
        assert all(t.at < end.at for t in turns) and "timestamp" not in end.event  # stamped when sent
    with pytest.raises(ConfigError):
        paced_schedule(_dialogues(shared_data), 1, rate=0.0, spread_s=1.0, seed=1, prefix="p")


def test_the_exported_histograms_p99_bucket_between_two_scrapes() -> None:
    def hist(counts: dict[str, float]) -> list[Sample]:
        return [("convmon_score_delay_seconds_bucket", {"scorer": "distilled", "le": le}, v)
                for le, v in counts.items()] + [("convmon_score_delay_seconds_bucket", {"scorer": "llm", "le": "1.0"},
                                                 9.0)]

    before = hist({"1.0": 10, "2.5": 10, "+Inf": 10})
    after = hist({"1.0": 108, "2.5": 109, "+Inf": 110})  # 100 new: 98 under 1 s, 1 under 2.5 s, 1 above
    assert histogram_quantile_le(before, after, "convmon_score_delay_seconds", 0.98, scorer="distilled") == 1.0
    assert histogram_quantile_le(before, after, "convmon_score_delay_seconds", 0.99, scorer="distilled") == 2.5
    assert histogram_quantile_le(before, before, "convmon_score_delay_seconds", 0.99, scorer="distilled") is None


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_short_paced_run_scores_every_conversation(shared_data: Path) -> None:
    out = run_latency(LatencyConfig(rate=10.0, duration_s=3.0, spread_s=1.0, warmup=5, train_labels=200,
                                    data_dir=shared_data))
    lat = out["latency"]
    assert (lat["conversations"], lat["scored"], lat["missing_ids"]) == (30, 30, [])
    assert 0 < lat["p50_s"] <= lat["p99_s"] <= lat["max_s"] < 30
    assert out["worker_code"]["monitor_cli_file"].startswith(out["worker_code"]["checkout"])
    assert out["worker_cpu_us_per_conversation"] > 0 and out["score_timestamp_types"] == [0]
    assert any(key == "end → score p99" for key, _ in latency_rows(out))
