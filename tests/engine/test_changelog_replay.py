"""Restore of a state partition from its changelog: which records count (committed offsets, fences), and which
keys are written again so compaction cannot keep a skipped value."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from monitor.engine.changelog import FENCE, OFFSETS, WRITER, PartitionStore, Write, replay

Record = tuple[bytes, bytes | None, dict[str, bytes]]


def rec(key: bytes, value: object, writer: bytes, **offsets: int) -> Record:
    return (key, None if value is None else orjson.dumps(value), {WRITER: writer, OFFSETS: orjson.dumps(offsets)})


def fence(writer: bytes) -> Record:
    return (FENCE + writer, writer, {})


def test_records_count_only_when_the_group_committed_the_offsets_they_carry() -> None:
    log = [fence(b"a"), rec(b"Sk", 1, b"a", events=10), rec(b"Sk", 2, b"a", events=11, verdicts=3),
           rec(b"Sj", 5, b"a", events=12)]
    restored = replay(log, {"events": 11, "verdicts": 3})
    assert restored.values == {b"Sk": 2}
    assert restored.skipped == 1
    assert restored.rewrite == {b"Sj": None}  # newest record skipped, nothing committed before it: a tombstone


def test_a_record_carrying_a_topic_never_committed_is_not_committed() -> None:
    assert replay([rec(b"Sk", 1, b"a", verdicts=1)], {"events": 5}).values == {}


def test_after_a_fence_only_its_writers_records_count() -> None:
    """An expelled owner (a) may append after the new owner's (b) fence: those records are skipped, and a key
    whose newest record they were is written again with the value restored."""
    log = [fence(b"a"), rec(b"Sk", 1, b"a", events=1), fence(b"b"), rec(b"Sk", 9, b"a", events=1),
           rec(b"Sj", 3, b"b", events=2)]
    restored = replay(log, {"events": 2})
    assert restored.values == {b"Sk": 1, b"Sj": 3}
    assert restored.rewrite == {b"Sk": 1}


def test_a_tombstone_removes_the_key_and_a_later_committed_record_clears_the_rewrite() -> None:
    log = [rec(b"Sk", 1, b"", events=1), rec(b"Sk", None, b"", events=2), rec(b"Sk", 4, b"", events=9)]
    assert replay(log, {"events": 2}).values == {}
    log.append(rec(b"Sk", 5, b"", events=2))
    restored = replay(log, {"events": 2})
    assert restored.values == {b"Sk": 5} and restored.rewrite == {}


@given(st.lists(st.tuples(st.sampled_from([b"Sa", b"Sb", b"Cc"]), st.integers(0, 9) | st.none(),
                          st.integers(0, 20)), max_size=40), st.integers(0, 20))
def test_replay_equals_applying_the_committed_prefix(writes: list[tuple[bytes, int | None, int]],
                                                     committed: int) -> None:
    """With offsets written in order (one writer), the restored state is exactly the state after the writes whose
    offsets were committed, and every key that differs from the log's last word is rewritten."""
    ordered = sorted(writes, key=lambda w: w[2])
    log = [rec(k, v, b"w", events=o) for k, v, o in ordered]
    expected: dict[bytes, int] = {}
    for k, v, o in ordered:
        if o <= committed:
            if v is None:
                expected.pop(k, None)
            else:
                expected[k] = v
    restored = replay([fence(b"w"), *log], {"events": committed})
    assert restored.values == expected
    last = {k: (v, o) for k, v, o in ordered}
    assert set(restored.rewrite) == {k for k, (_, o) in last.items() if o > committed}


def test_partition_store_logs_writes_and_drops_revoked_partitions() -> None:
    pending: list[Write] = []
    store = PartitionStore(b"S", pending)
    store.put("a", [1], 0)
    store.put("b", [2], 1)
    store.delete("a", 0)
    store.load("c", [3], 1)  # restored: not logged again
    assert pending == [Write(b"Sa", [1], 0), Write(b"Sb", [2], 1), Write(b"Sa", None, 0)]
    store.drop({1})
    assert dict(store.items()) == {}
