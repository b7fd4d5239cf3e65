"""The reopen state's bench: per conversation kept reopenable, its turns stay; with reopening off they go."""

from __future__ import annotations

from bench.reopen_state import measure_reopen_state


def test_the_bench_measures_kept_closed_conversations_against_open_and_off() -> None:
    result = measure_reopen_state(conversations=300, turns=4, chars=100)
    kept, off, open_ = result["closed_reopenable"], result["closed_reopen_off"], result["open"]
    assert (kept["reopenable"], kept["closed"], off["reopenable"], open_["open"]) == (300, 300, 0, 300)
    assert off["state_bytes"] < 100 < 4 * 100 < kept["state_bytes"]  # the kept turns' text is in the state
    assert kept["heap_bytes"] > off["heap_bytes"] > 0
    ledger = result["revision_ledger_per_scorer"]
    assert ledger["rubric_items"] == 20 and ledger["state_bytes"] > 0 and ledger["cpu_us_per_record"] > 0
