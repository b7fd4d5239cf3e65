"""`convmon replay` reads USS through the dataset reader: same dialogues, ids and empty-utterance rule."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from distill.datasets import load_uss
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import decode_event
from monitor.tools.replay import read_dataset

USS = (
    "\nUSER\thi, any thrillers?\t\t3,3,3\n"
    "SYSTEM\t\t\t\n"
    "USER\t\t\t2,2,3\n"
    "SYSTEM\ttry Heat\t\t\n"
    "USER\tnice, thanks\t\t4,4,5\n"
    "USER\tOVERALL\t\t3,4,4\n"
    "\nUSER\thello\t\t3,3,3\nSYSTEM\thi\t\t\n"
)


def test_uss_replay_events_match_the_dataset_reader(tmp_path: Path) -> None:
    path = tmp_path / "ReDial.txt"
    path.write_text(USS, encoding="utf-8")
    replay = read_dataset(path)
    assert replay.empty_utterances == 2
    for event in replay.events:
        decode_event(orjson.dumps(event))  # every event is valid input
    turns = [e for e in replay.events if e["type"] == "turn"]
    ends = [e for e in replay.events if e["type"] == "end"]
    dialogues = load_uss(path)
    assert [e["conversation_id"] for e in ends] == [d.dialogue_id for d in dialogues] == ["ReDial-0000", "ReDial-0001"]
    for dialogue in dialogues:
        mine = [(e["turn_index"], e["role"], e["text"]) for e in turns if e["conversation_id"] == dialogue.dialogue_id]
        assert mine == [(t.index, t.role, t.text) for t in dialogue.to_conversation().turns]
    assert [e["text"] for e in turns][:3] == ["hi, any thrillers?", "try Heat", "nice, thanks"]
    assert turns[0]["metadata"] == {"app": "ReDial"} and turns[1]["metadata"] == {}
    assert ends[0]["feedback"] == {"csat": 4} and "feedback" not in ends[1]  # no OVERALL line: no CSAT
    assert ends[0]["timestamp"] > turns[2]["timestamp"]


def test_uss_replay_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("\nUSER\thi\t\t3\nBOT\tx\t\t\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.txt:3: ROLE must be USER or SYSTEM, got 'BOT'"):
        read_dataset(path)
    with pytest.raises(ConfigError, match="unknown format"):
        read_dataset(path.rename(tmp_path / "bad.csv"))


def test_jsonl_replay_has_nothing_left_out(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "end", "conversation_id": "c", "timestamp": 1.0}\n', encoding="utf-8")
    assert read_dataset(path).events == [{"type": "end", "conversation_id": "c", "timestamp": 1.0}]
    assert read_dataset(path).empty_utterances == 0


def test_relative_time_replay_takes_the_broker_records_time(tmp_path: Path) -> None:
    path = tmp_path / "ReDial.txt"
    path.write_text(USS, encoding="utf-8")
    conversation = tmp_path / "old.jsonl"
    conversation.write_text('{"conversation_id": "c", "started_at": 1.6e9, "ended_at": 1.6e9, '
                            '"turns": [{"index": 0, "role": "user", "text": "x", "timestamp": 1.6e9}]}\n')
    events = read_dataset(path, relative_time=True).events + read_dataset(conversation, relative_time=True).events
    assert not any("timestamp" in e or "started_at" in e or "ended_at" in e for e in events)
    assert events[-1]["turns"] == [{"index": 0, "role": "user", "text": "x"}]
    now = 1.9e9  # the broker record's time of each event, when the worker reads it
    decoded = [decode_event(orjson.dumps(e), timestamp=now) for e in events]
    assert {getattr(d, "timestamp", now) for d in decoded} == {now}
    assert read_dataset(path).events[0]["timestamp"] == 1.7e9  # the default keeps the file's times


def test_a_replayed_file_cannot_carry_convmons_own_rejection_marker(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "rejected", "conversation_id": "c", "timestamp": 1.0, '
                    '"rejection": {"reason": "invalid_schema"}}\n', encoding="utf-8")
    for fmt in ("json", "openai"):
        with pytest.raises(ConfigError, match=r"events.jsonl:1: field 'type': 'rejected' is convmon's own record"):
            read_dataset(path, fmt=fmt)  # type: ignore[arg-type]
