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
