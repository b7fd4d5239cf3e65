"""The redactor's recall on the committed PII set, and `convmon bench pii` as a command (JSON)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.pii import PII_SET, found, recall
from distill.datasets import SHARED_DATA
from monitor.judge.redact import Redactor

BARS = ("email", "phone", "card", "iban", "ip", "national_id")


def test_the_set_is_frozen_and_large_enough() -> None:
    records = [json.loads(line) for line in PII_SET.read_text(encoding="utf-8").splitlines()]
    assert len(records) >= 500
    assert {r["type"] for r in records} == {*BARS, "address", "name"}
    phones = {(r["locale"], r["variant"]) for r in records if r["type"] == "phone"}
    assert len({loc for loc, _ in phones}) >= 10 and {v for _, v in phones} == {"with_cc", "national"}
    assert 0.18 <= sum(r["split"] == "heldout" for r in records) / len(records) <= 0.22


def test_recall_meets_the_bars_on_the_tuning_split_and_is_stated_on_the_held_out_one() -> None:
    result = recall(Redactor())
    assert all(result["tune"][kind]["recall"] >= 0.98 for kind in BARS), result["tune"]
    # held out (never tuned on): 1.0 on every barred type (phones 39/39 since local numbers without an area code
    # are read: docs/security.md)
    assert all(result["heldout"][kind]["recall"] >= 0.98 for kind in BARS), result["heldout"]
    assert result["tune"]["name"]["recall"] >= 0.6 and result["tune"]["address"]["recall"] >= 0.75


def test_recall_counts_a_partial_redaction_as_a_miss() -> None:
    text = "call 0161 496 0066 x123"
    assert found(text, 5, len(text), [(5, 18, "PHONE")]) is False
    assert found(text, 5, len(text), [(5, len(text), "PHONE")]) is True


@pytest.mark.skipif(not (SHARED_DATA / "uss" / "CCPE.txt").exists(), reason="needs the shared USS data")
def test_bench_pii_prints_json_with_both_splits_and_the_uss_rate(tmp_path: Path) -> None:
    out = tmp_path / "pii.json"
    result = subprocess.run([sys.executable, "-m", "monitor.cli", "bench", "pii", "--datasets", "CCPE", "--json",
                             "--out", str(out)], env={**os.environ, "PYTHONPATH": os.getcwd()},
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report == json.loads(out.read_text())
    assert set(report["recall"]) >= {"tune", "heldout"} and report["recall"]["spans"] == 696
    assert report["uss"]["files"] == ["CCPE"] and report["uss"]["false_positive_rate"] <= 0.01


@pytest.mark.long  # two trainings of the served recipe (~15 s of CPU): `make faults` and CI run it
@pytest.mark.skipif(not (SHARED_DATA / "uss" / "CCPE.txt").exists(), reason="needs the shared USS data")
def test_scoring_effect_trains_the_served_recipe_on_raw_and_on_redacted_text() -> None:
    from bench.pii_scoring import scoring_effect

    # an extra pattern that hits most CCPE turns: the redacted run must really train on different text
    result = scoring_effect(SHARED_DATA, ["CCPE"], splits=1, redactor=Redactor([r"\bmovies?\b"]), inputs=("cut",))
    [row] = result["rows"]
    assert row["dataset"] == "CCPE" and row["input"] == "cut" and row["conversations"] == 500
    assert row["turns_changed_by_redaction"] > 100
    assert row["roc_auc"]["raw"] > 0.55 and row["roc_auc"]["redacted"] > 0.55  # the recipe has signal on cut input
    assert row["roc_auc_per_split"]["raw"] != row["roc_auc_per_split"]["redacted"]
    assert row["difference"] == pytest.approx(row["roc_auc"]["redacted"] - row["roc_auc"]["raw"], abs=2e-4)
    assert result["max_abs_difference"] == abs(row["difference"]) and "judge_slice" in result
