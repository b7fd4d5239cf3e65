from __future__ import annotations

from monitor.stages.deadletter import HEADROOM, dead_letter
from monitor.stages.dedup import DedupWindow
from monitor.stages.lag import lag_by_topic
from tests.support.memstore import MemStore


def test_dedup_counts_each_key_once_and_stays_bounded() -> None:
    store = MemStore()
    d = DedupWindow(store, window_s=100.0, max_keys=1000)
    assert d.first("distilled:a", 0, 1.0) and not d.first("distilled:a", 0, 2.0)
    for i in range(5000):
        d.first(f"distilled:{i}", 1, 10.0)
    assert d.size(1) == 1000 and len([k for k in store.data if store.data[k][1] == 1]) == 1000
    assert not d.first("distilled:4999", 1, 11.0)  # the newest marks are kept
    d.first("distilled:late", 0, 200.0)  # older than the window: forgotten
    assert "distilled:a" not in store.data and d.size(0) == 1


def test_dedup_is_rebuilt_from_the_store_for_owned_partitions() -> None:
    store = MemStore()
    d = DedupWindow(store, window_s=100.0, max_keys=1000)
    d.first("llm:x", 2, 1.0)
    d.first("llm:y", 3, 1.0)
    restored = DedupWindow(store.restarted(), window_s=100.0, max_keys=1000)
    restored.rebuild({2})
    assert not restored.first("llm:x", 2, 5.0) and restored.size(3) == 0


def test_dead_letters_keep_a_bounded_prefix_and_the_original_size() -> None:
    raw = b"x" * 5_000_000
    letter = dead_letter(raw, b"k", reason="too_large", detail="d" * 5000, stage="sessionize", max_bytes=1 << 20)
    headers = dict(letter.headers)
    assert len(letter.value) == (1 << 20) - HEADROOM and raw.startswith(letter.value)
    assert headers["convmon-original-bytes"] == b"5000000" and headers["convmon-truncated"] == b"1"
    assert headers["convmon-reason"] == b"too_large" and len(headers["convmon-detail"]) == 2000
    small = dead_letter(b"{bad", None, reason="malformed_json", detail="", stage="x", max_bytes=1 << 20)
    assert small.value == b"{bad" and dict(small.headers)["convmon-truncated"] == b"0"


def test_lag_sums_owned_partitions_per_topic() -> None:
    owned = [("ev", 0), ("ev", 1), ("judge", 0)]
    lags = lag_by_topic(owned, ["ev", "judge", "labels"], highwater={("ev", 0): 10, ("ev", 1): 5, ("judge", 0): 3},
                        processed={("ev", 0): 4, ("judge", 0): None})
    assert lags == {"ev": 5 + 5, "judge": 3, "labels": 0}
