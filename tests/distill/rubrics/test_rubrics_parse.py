"""Parsers and loaders of rubric learning: reasons, rubric lists, item ids, labelled files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distill.rubrics.extract import Pattern, load_labeled, parse_reasons
from distill.rubrics.summarize import batches, parse_rubric, split_entry, to_items
from monitor.contracts.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<REASONS>\n- a\n- b\n- c\n- d\n</REASONS>", ["a", "b", "c"]),
        ("sure! <reasons>1. thanks the agent\n2) accepts it</reasons>", ["thanks the agent", "accepts it"]),
        ("<REASONS> NONE. </REASONS>", []),
        ("<REASONS>\n* cut off at the output lim", ["cut off at the output lim"]),
        ("The user was happy.", None),
    ],
)
def test_parse_reasons(text: str, expected: list[str] | None) -> None:
    assert parse_reasons(text, 3) == expected


def test_parse_rubric_falls_back_to_numbered_lines_and_skips_placeholders() -> None:
    assert parse_rubric("1. Gratitude: thanks\n2) Praise: great\n3. ...") == ["Gratitude: thanks", "Praise: great"]
    assert parse_rubric("<Rubric>\nno list here\n</Rubric>") == []


def test_to_items_makes_valid_unique_ids() -> None:
    items = to_items(["Gratitude: thanks", "Gratitude: also thanks", "3D printing: wants models", "!!!: odd"], "SAT")
    assert [i.id for i in items] == ["sat.gratitude", "sat.gratitude_2", "sat.i_3d_printing", "sat.item"]
    assert items[0].description == "thanks" and all(i.polarity == "sat" for i in items)
    assert to_items(["Gratitude: x"], "DSAT", taken={"dsat.gratitude"})[0].id == "dsat.gratitude_2"


@given(st.lists(st.text(min_size=1, max_size=80).filter(lambda s: s.strip() and "\n" not in s), max_size=12))
def test_any_numbered_answer_becomes_valid_items(entries: list[str]) -> None:
    text = "<Rubric>\n" + "\n".join(f"{i}. {e}" for i, e in enumerate(entries, 1)) + "\n</Rubric>"
    items = to_items(parse_rubric(text), "DSAT")
    assert len({i.id for i in items}) == len(items)
    assert all(i.name.strip() and i.description.strip() for i in items)


def test_split_entry_long_prefix_is_not_a_name() -> None:
    name, description = split_entry("The user says that the agent was wrong about the hotel: twice")
    assert name == "The user says that the agent"
    assert description.endswith("twice")


def test_batches_keep_repeats_and_are_seeded() -> None:
    patterns = [Pattern(f"c{i}", "SAT", f"reason {i % 3}") for i in range(7)] + [Pattern("d", "DSAT", "bad")]
    first = batches(patterns, "SAT", 3, seed=1)
    assert [len(b) for b in first] == [3, 3, 1]
    assert sorted(sum(first, [])) == sorted(p.text for p in patterns if p.label == "SAT")
    assert batches(patterns, "SAT", 3, seed=1) == first


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def turn(text: str) -> list[dict]:
    return [{"index": 0, "role": "user", "text": text}]


def test_load_jsonl_labels_thumbs_and_csat(tmp_path: Path) -> None:
    path = _write(tmp_path / "l.jsonl", [
        {"conversation_id": "a", "label": "sat", "turns": turn("x")},
        {"conversation_id": "b", "label": "thumbs_down", "turns": turn("x")},
        {"conversation_id": "c", "feedback": {"thumbs": "up"}, "turns": turn("x")},
        {"conversation_id": "d", "feedback": {"csat": 2}, "turns": turn("x")},
        {"conversation_id": "e", "feedback": {"csat": 3}, "turns": turn("x")},
    ])
    data, counts = load_labeled(path)
    assert [(x.conversation.conversation_id, x.label) for x in data] == [("a", "SAT"), ("b", "DSAT"), ("c", "SAT"),
                                                                          ("d", "DSAT")]
    assert counts == {"SAT": 2, "DSAT": 2, "NEUTRAL": 1}


def test_load_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "l.jsonl", [{"conversation_id": "a", "turns": turn("x")}])
    with pytest.raises(ConfigError, match=r"l.jsonl:1: needs a 'label' .* Got None instead"):
        load_labeled(path)
    path = _write(tmp_path / "l.jsonl", [{"conversation_id": "a", "label": "SAT", "turns": []}])
    with pytest.raises(ConfigError, match=r"l.jsonl:1: field 'turns'"):
        load_labeled(path)
    with pytest.raises(ConfigError, match="not found"):
        load_labeled(tmp_path / "missing.jsonl")


def test_load_uss_uses_spur_labels_and_the_cut(shared_data: Path) -> None:
    from distill.datasets.uss import load_uss

    path = shared_data / "uss" / "MWOZ.txt"
    data, counts = load_labeled(path, limit=40)
    dialogues = {d.dialogue_id: d for d in load_uss(path)[:40]}
    assert counts["SAT"] + counts["DSAT"] + counts["NEUTRAL"] == 40 and len(data) == counts["SAT"] + counts["DSAT"]
    for item in data:
        dialogue = dialogues[item.conversation.conversation_id]
        assert item.label == dialogue.label
        assert len(item.conversation.turns) <= len(dialogue.turns)
