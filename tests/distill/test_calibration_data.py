"""Loading the LLM-Rubric TSVs into calibration arrays, and the errors users hit on bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distill.calibration.data import (
    CalibrationDataError,
    from_records,
    load_calibration_set,
    read_judge_evaluations,
)

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "llm-rubric"
JUDGMENTS = DATA / "human_judges_synth_all_FIXED_ANON.tsv"
EVALUATIONS = DATA / "gpt-3.5-turbo-16k_synth_evaluations_FIXED.tsv"
IDS = DATA / "synth_dialogue_ids.tsv"


def require_data() -> None:
    missing = [p for p in (JUDGMENTS, EVALUATIONS, IDS) if not p.is_file()]
    if missing:
        pytest.fail(f"shared LLM-Rubric data missing: {missing}; see ../shared/data/README.md")


def write(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_synthetic_set_matches_the_paper_universe() -> None:
    require_data()
    data = load_calibration_set(JUDGMENTS, EVALUATIONS, ids=IDS)
    assert data.questions == ("Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q0")
    assert data.X_dialogues.shape == (223, 9, 4)
    assert data.n_options.tolist() == [4, 4, 4, 4, 4, 4, 4, 3, 4]  # Q8 has 3 options
    assert len(data) == 662 and data.target_index == 8
    assert data.notes == {"rows_read": 743, "no_judge_evaluation": 0, "outside_ids": 76, "target_missing": 5}
    assert len(data.judge_index()) == 24  # judges are the annotator ids
    assert (data.labels[:, data.target_index] > 0).all()
    # NA answers stay in, masked: Q2 (grounding) is "not applicable" for many rows
    assert 100 < (~data.mask[:, 1]).sum() < len(data)
    # the row's X is its dialogue's judge distribution, unnormalised but summing to ~1 here
    np.testing.assert_allclose(data.X.sum(axis=2), 1.0, atol=1e-4)
    assert data.X.shape == (662, 9, 4)


def test_empty_cells_are_not_applicable(tmp_path: Path) -> None:
    ev = write(tmp_path / "ev.tsv", ["text_id\tcriterion\tanswer1_prob\tanswer2_prob",
                                     "d1\tQ1\t0.2\t0.8", "d1\tQ0\t0.6\t0.4"])
    hj = write(tmp_path / "hj.tsv", ["text_id\tQ1\tQ0\tannotator_id", "d1\t\t2\ta", "d1\t1.0\t0\tb"])
    data = load_calibration_set(hj, ev, max_options=2)
    assert data.labels.tolist() == [[0, 2]] and data.judges.tolist() == ["a"]
    assert data.notes["target_missing"] == 1


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        (["text_id\tQ0\tannotator_id", "d1\t5\ta"], r"hj.tsv:2 \[Q0\]: answer must be an integer in 1..2"),
        (["text_id\tQ0\tannotator_id", "d1\tgood\ta"], r"hj.tsv:2 \[Q0\]: expected a number, got 'good'"),
        (["text_id\tQ0", "d1\t1"], r"hj.tsv:1: missing column\(s\) annotator_id"),
        (["text_id\tQ0\tannotator_id", "d1\t1\t"], r"hj.tsv:2 \[annotator_id\]: empty judge id"),
    ],
)
def test_bad_judgments_name_file_line_and_field(tmp_path: Path, rows: list[str], match: str) -> None:
    ev = write(tmp_path / "ev.tsv", ["text_id\tcriterion\tanswer1_prob\tanswer2_prob", "d1\tQ0\t0.5\t0.5"])
    with pytest.raises(CalibrationDataError, match=match):
        load_calibration_set(write(tmp_path / "hj.tsv", rows), ev, max_options=2)


def test_bad_evaluations_and_swapped_files(tmp_path: Path) -> None:
    ev = write(tmp_path / "ev.tsv", ["text_id\tcriterion\tanswer1_prob\tanswer2_prob", "d1\tQ0\t1.5\t0"])
    with pytest.raises(CalibrationDataError, match=r"ev.tsv:2 \[answer1_prob\]: probability must be in"):
        read_judge_evaluations(ev, max_options=2)
    dup = write(tmp_path / "dup.tsv", ["text_id\tcriterion\tanswer1_prob\tanswer2_prob",
                                       "d1\tQ0\t1\t0", "d1\tQ0\t1\t0"])
    with pytest.raises(CalibrationDataError, match=r"dup.tsv:3: duplicate \(text_id, criterion\)"):
        read_judge_evaluations(dup, max_options=2)
    hj = write(tmp_path / "hj.tsv", ["text_id\tQ0\tannotator_id", "d1\t1\ta"])
    with pytest.raises(CalibrationDataError, match="looks like a human-judgments file"):
        load_calibration_set(dup, hj, max_options=2)
    with pytest.raises(CalibrationDataError, match="nope.tsv: file not found"):
        load_calibration_set(tmp_path / "nope.tsv", ev)
    with pytest.raises(CalibrationDataError, match="target question 'Q9' not in"):
        load_calibration_set(hj, write(tmp_path / "ok.tsv", ["text_id\tcriterion\tanswer1_prob\tanswer2_prob",
                                                             "d1\tQ0\t1\t0"]), target="Q9", max_options=2)


def test_from_records_builds_the_same_layout() -> None:
    data = from_records(
        {"c1": {"thumbs": [0.9, 0.1], "Q0": [0.2, 0.3, 0.5]}, "c2": {"Q0": [0.1, 0.1, 0.8]}},
        [("c1", "tenant-a", {"Q0": 3, "thumbs": 1}), ("c2", "csat", {"Q0": 1}), ("c3", "x", {"Q0": 2})],
        questions=["thumbs", "Q0"], n_options=[2, 3],
    )
    assert data.X_dialogues.shape == (2, 2, 3)
    assert data.X_dialogues[1, 0].tolist() == [0, 0, 0]  # not asked -> zeros
    assert data.labels.tolist() == [[1, 3], [0, 1]]
    assert data.judges.tolist() == ["tenant-a", "csat"]
