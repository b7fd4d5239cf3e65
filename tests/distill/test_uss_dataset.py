"""USS loader: the four-field format, the upstream turn rating and SPUR's Appendix B labels."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distill.datasets import UssFormatError, conversation_label, load_uss, parse_uss, rated_prefixes, turn_rating
from monitor.contracts.errors import ConfigError

SAMPLE = (
    "\nUSER\tfind me a cheap hotel\tHotel-Inform\t3,3,3\n"
    "SYSTEM\tthe acorn is cheap\tHotel-Inform\t\n"
    "USER\tthat is not cheap at all\t\t2,2,3\n"
    "SYSTEM\tsorry, try the alpha\t\t\n"
    "USER\tgreat, thanks\tgeneral-thank\t4,5,4\n"
    "USER\tOVERALL\t\t3,4,3\n"
    "\nUSER\thello\t\t3,3,3\nSYSTEM\thi\t\t\nUSER\tOVERALL\t\t3,3,3\n"
)


def test_parse_sample() -> None:
    first, second = parse_uss(SAMPLE, source="X")
    assert first.dialogue_id == "X-0000" and second.dialogue_id == "X-0001"
    assert [t.role for t in first.turns] == ["user", "assistant", "user", "assistant", "user"]
    assert first.overall == (3, 4, 3) and first.turns[0].action == "Hotel-Inform"
    assert [t.rating for t in first.user_turns] == [3, 2, 4]
    assert first.dissatisfied and not second.dissatisfied
    # first non-neutral turn (mean 2.33) is DSAT; the SAT turn at position 4 contradicts: cut there
    assert conversation_label(first) == ("DSAT", 4)
    assert [t.text for t in first.to_conversation(cut=True).turns][-1] == "sorry, try the alpha"
    assert second.label == "NEUTRAL"


def test_rated_prefixes_end_at_each_user_turn() -> None:
    dialogue = parse_uss(SAMPLE, source="X")[0]
    prefixes = rated_prefixes(dialogue)
    assert [len(c.turns) for c, _ in prefixes] == [1, 3, 5]
    assert [t.rating for _, t in prefixes] == [3, 2, 4]
    assert {c.metadata["dialogue_id"] for c, _ in prefixes} == {"X-0000"}
    assert prefixes[1][0].conversation_id == "X-0000#2"


@pytest.mark.parametrize(
    ("ratings", "expected"), [((3, 3, 2, 2), 2), ((5, 4, 4), 4), ((1, 5), 1), ((2, 2, 3, 3, 3), 3), ((4,), 4)]
)
def test_turn_rating_mode_ties_low(ratings: tuple[int, ...], expected: int) -> None:
    assert turn_rating(ratings) == expected


@given(st.lists(st.integers(1, 5), min_size=1, max_size=7))
def test_turn_rating_is_a_most_frequent_value(ratings: list[int]) -> None:
    counts = Counter(ratings)
    rating = turn_rating(ratings)
    assert counts[rating] == max(counts.values())
    assert all(r >= rating for r, c in counts.items() if c == counts[rating])


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("\nUSER\thi\t3\n", r"<string>:2: expected 4 tab-separated fields, got 3"),
        ("\nBOT\thi\t\t3\n", r"ROLE must be USER or SYSTEM, got 'BOT'"),
        ("\nUSER\thi\t\t3,x\n", r"SATS must be comma-separated integers"),
        ("\nUSER\thi\t\t3,6\n", r"ratings must be in 1..5"),
        ("\nUSER\tOVERALL\t\t3\nUSER\thi\t\t3\n", r":3: utterance after the OVERALL line"),
    ],
)
def test_format_errors_name_the_line(text: str, match: str) -> None:
    with pytest.raises(UssFormatError, match=match):
        parse_uss(text)


@pytest.mark.parametrize(("name", "counts"), [("MWOZ", (547, 444, 9)), ("SGD", (682, 315, 3))])
def test_spur_appendix_b_label_counts(shared_data: Path, name: str, counts: tuple[int, int, int]) -> None:
    dialogues = load_uss(shared_data / "uss" / f"{name}.txt")
    assert len(dialogues) == 1000
    labels = Counter(d.label for d in dialogues)
    assert (labels["SAT"], labels["DSAT"], labels["NEUTRAL"]) == counts
    rated = [t.rating for d in dialogues for t in d.user_turns]
    assert 0.04 < sum(r <= 2 for r in rated) / len(rated) < 0.08  # "about 6%" per the data README


def test_load_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="cannot read USS file"):
        load_uss(tmp_path / "nope.txt")


# Upstream ReDial has such lines: an empty SYSTEM utterance and rated USER lines without text.
WITH_EMPTY = (
    "\nUSER\thi, any thrillers?\t\t3,3,3\n"
    "SYSTEM\t\t\t\n"
    "USER\t\t\t2,2,3\n"
    "SYSTEM\ttry Heat\t\t\n"
    "USER\t  \t\t3,3,3\n"
    "USER\tnice, thanks\t\t4,4,5\n"
    "USER\tOVERALL\t\t3,4,3\n"
)


def test_empty_utterances_are_kept_for_labels_and_left_out_of_conversations() -> None:
    (dialogue,) = parse_uss(WITH_EMPTY, source="R")
    assert len(dialogue.turns) == 6 and dialogue.empty_turns == 3
    assert [t.empty for t in dialogue.turns] == [False, True, True, False, True, False]
    # the rated empty user turn still sets the label (mean 2.33: DSAT), the SAT turn at position 5 cuts
    assert conversation_label(dialogue) == ("DSAT", 5) and dialogue.dissatisfied
    full = dialogue.to_conversation()
    assert [(t.index, t.role, t.text) for t in full.turns] == [
        (0, "user", "hi, any thrillers?"), (1, "assistant", "try Heat"), (2, "user", "nice, thanks")]
    assert [t.text for t in dialogue.to_conversation(cut=True).turns] == ["hi, any thrillers?", "try Heat"]
    prefixes = rated_prefixes(dialogue)  # one per rated user turn with text
    assert [(c.conversation_id, len(c.turns), t.rating) for c, t in prefixes] == [("R-0000#0", 1, 3),
                                                                                  ("R-0000#5", 3, 4)]


def test_dialogue_of_empty_utterances_only_is_an_error() -> None:
    with pytest.raises(UssFormatError, match=r"<string>:2: dialogue without a non-empty utterance"):
        parse_uss("\nUSER\t\t\t3\nSYSTEM\t \t\t\nUSER\tOVERALL\t\t3\n")


def test_cut_before_any_text_is_an_error() -> None:
    text = "\nUSER\t\t\t1,1,1\nUSER\tgreat\t\t5,5,5\nUSER\tOVERALL\t\t3\n"
    (dialogue,) = parse_uss(text)
    with pytest.raises(ConfigError, match="uss-0000: no non-empty utterance before its contradiction cut"):
        dialogue.to_conversation(cut=True)
    assert [t.text for t in dialogue.to_conversation().turns] == ["great"]
