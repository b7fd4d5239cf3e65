"""The faust release's totals were a transaction in its changelog; the take-over keeps exactly what committed."""

from __future__ import annotations

from monitor.engine.upgrade import settled

GROUP = '#g|[0,"scored",["distilled"]]'


def test_a_batch_without_its_commit_record_counts_with_the_values_before_it_and_its_marks_go() -> None:
    faust = {
        "#c|0": {"partition": 0, "seq": 2},  # batch 3 of partition 0 never committed
        GROUP: [0, "scored", ["distilled"], [[[], 5.0, 4.0]], 3],
        '#g|[0,"scored",["llm"]]': [0, "scored", ["llm"], [[[], 2.0, 1.0]], 2],
        "distilled:kept": [10.0, 0, 2],
        "distilled:lost": [11.0, 0, 3],
        "#c|1": {"partition": 1, "seq": 7},
        "distilled:other": [12.0, 1, 7],
        "s|open-a": {"p": 0},  # not the scored table's business: kept as it is
    }
    assert settled(faust) == {
        GROUP: [0, "scored", ["distilled"], [[[], 4.0]]],
        '#g|[0,"scored",["llm"]]': [0, "scored", ["llm"], [[[], 2.0]]],
        "distilled:kept": [10.0, 0],
        "distilled:other": [12.0, 1],
        "s|open-a": {"p": 0},
    }


def test_a_partition_with_no_commit_record_kept_nothing_of_its_batches() -> None:
    assert settled({GROUP: [0, "scored", ["distilled"], [[[], 1.0, 0.0]], 1], "llm:x": [1.0, 0, 1]}) == {
        GROUP: [0, "scored", ["distilled"], [[[], 0.0]]]}
