"""``bench use``'s OVERALL protocol at small scale: nested selection, fixed held-out splits, labels, agreement."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.doc_use_overall import overall_markdown
from bench.use import load_dialogues
from bench.use_agreement import overall_agreement
from bench.use_overall import LABELS, OverallConfig, _held_out, overall_rows, recipe_featurizer
from distill.datasets.uss import UssDialogue, UssTurn
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import REPO_ROOT


def _dialogue(did: str, overall: tuple[int, ...]) -> UssDialogue:
    return UssDialogue(did, (UssTurn("user", "hello", ratings=(3,) * len(overall)),), overall=overall)


def test_labels_read_the_mean_overall_rating() -> None:
    assert LABELS["overall<3"](_dialogue("a", (2, 3, 3))) and not LABELS["overall<3"](_dialogue("b", (3, 3, 3)))
    assert LABELS["overall<=2.5"](_dialogue("c", (2, 3))) and not LABELS["overall<=2.5"](_dialogue("d", (2, 3, 3)))
    assert not LABELS["spur"](_dialogue("e", (1, 1, 1)))  # every turn neutral: the SPUR label is NEUTRAL


def test_overall_agreement_is_one_when_panels_agree_and_near_chance_when_half_is_noise() -> None:
    rng = np.random.default_rng(0)
    agreeing = [_dialogue(str(i), (r,) * 4) for i, r in enumerate(rng.choice([2, 4], 200))]
    assert overall_agreement(agreeing, "agree", 3.0, False, splits=3)["roc_auc"] == 1.0
    noise = [_dialogue(str(i), tuple(rng.choice([1, 2, 4, 5], 4))) for i in range(400)]
    got = overall_agreement(noise, "noise", 3.0, False, splits=5)
    assert got["dialogues"] == 400 and 0.3 < got["roc_auc"] < 0.7


def test_held_out_splits_are_fixed_by_seed_a_quarter_of_each_set() -> None:
    sets = {"MWOZ": np.arange(0, 100), "SGD": np.arange(100, 140)}
    config = OverallConfig(seed=7)
    first, again, other = _held_out(sets, config, 0), _held_out(sets, config, 0), _held_out(sets, config, 1)
    assert {k: len(v) for k, v in first.items()} == {"MWOZ": 25, "SGD": 10}
    assert all(np.array_equal(first[k], again[k]) for k in sets) and not np.array_equal(first["MWOZ"], other["MWOZ"])
    assert set(first["SGD"]) <= set(sets["SGD"])


def test_recipe_weight_suffix_sets_the_lexicon_weight() -> None:
    assert recipe_featurizer("hashing+lexicon@10").transformer_list[1][1].weight == 10.0
    assert recipe_featurizer("hashing+lexicon").transformer_list[1][1].weight == 3.0


def test_overall_rows_select_by_training_cv_only_and_report_every_set(shared_data: Path) -> None:
    dialogues = {n: load_dialogues(shared_data, n, 200) for n in ("MWOZ", "SGD", "CCPE")}
    config = OverallConfig(splits=2, labels=("overall<3", "overall<=2.5"), recipes=("hashing", "lexicon"))
    out = overall_rows({**dialogues, "CCPE": dialogues["CCPE"][:60]}, config)
    rows = {(r["label"], r["model"], r["dataset"]): r for r in out["rows"]}
    assert {k[2] for k in rows} == {"MWOZ", "SGD", "pooled", "CCPE"} and out["seeds"] == [0, 1]
    for label in out["chosen_on_all_training"]:
        picks = rows[(label, "selected", "MWOZ")]["chosen"]
        assert sum(picks.values()) == 2
        for name in ("MWOZ", "SGD", "pooled", "CCPE"):  # each split's selected scores are its pick's, not the best
            per_split = rows[(label, "selected", name)]["roc_auc_per_split"]
            assert all(any(a == rows[(label, r, name)]["roc_auc_per_split"][k] for r in picks)
                       for k, a in enumerate(per_split))
        assert rows[(label, "hashing", "CCPE")]["out_of_domain"]
        assert not rows[(label, "hashing", "SGD")]["out_of_domain"]
    assert out["shares"]["overall<3"]["MWOZ"] == pytest.approx(
        np.mean([LABELS["overall<3"](d) for d in dialogues["MWOZ"]]), abs=1e-4)
    assert set(out["score_cpu_ms_per_conversation"]) == {"hashing", "lexicon"}
    assert [(a["label"], a["dataset"]) for a in out["panel_agreement"]][:3] == [
        ("overall<3", "MWOZ"), ("overall<3", "SGD"), ("overall<3", "CCPE")]
    text = "\n".join(overall_markdown({"overall": out}))
    assert "### OVERALL protocol" in text and "| overall<3 | selected |" in text and "Bars (`overall<3`" in text


def test_a_label_too_rare_to_train_is_skipped_with_the_reason(shared_data: Path) -> None:
    dialogues = {n: load_dialogues(shared_data, n, 30) for n in ("MWOZ", "SGD")}
    out = overall_rows(dialogues, OverallConfig(splits=1, labels=("overall<=2.5",), recipes=("lexicon",),
                                                out_of_domain=()))
    assert out["rows"] == [] and "no item could be trained" in out["skipped"]["overall<=2.5"]


def test_the_overall_rubric_set_is_the_default_plus_one_whole_conversation_item() -> None:
    default = load_rubric_set("spur-copilot", REPO_ROOT / "prompts")
    overall = load_rubric_set("spur-copilot-overall", REPO_ROOT / "prompts")
    assert overall.items[:-1] == default.items  # the copied items never drift from the default's
    assert overall.items[-1].id == "dsat.overall" and overall.items[-1].polarity == "dsat"
