"""`bench report`: the turn-supervised rows come from their own saved run (use-turns.json), never by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import (
    cost,
    detect,
    distill_fidelity,
    doc,
    otlp_throughput,
    sampler_gain,
    throughput,
    throughput_cpu,
    use,
)
from bench.doc import COMMANDS, regenerate, render
from bench.doc_use import TURNS_MISSING, paired
from bench.use import TURN_MODELS, UseConfig


def _row(dataset: str, model: str, per_split: list[float] | None, **extra: Any) -> dict[str, Any]:
    """A table-1 row as ``bench use`` saves it; mean and std from the per-split scores when given."""
    f1 = extra.pop("f1", None)
    std = extra.pop("std", None)
    if per_split is not None:
        f1 = round(sum(per_split) / len(per_split), 2)
        std = round((sum((s - f1) ** 2 for s in per_split) / len(per_split)) ** 0.5, 2)
    row = {"dataset": dataset, "model": model, "features": model.removesuffix("+turns"), "protocol": "table1",
           "n": 1000, "train_fraction": 0.05, "test_fraction": 0.8, "precision": 60.0, "recall": 61.0,
           "weighted_f1": f1, "weighted_f1_std": std, "splits": 5, **extra}
    if per_split is not None:
        row["weighted_f1_per_split"] = per_split
    return row


HASHING_SGD = [60.0, 62.0, 64.0, 66.0, 68.0]  # mean 64.0
TURNS_SGD = [61.0, 65.0, 63.0, 67.0, 69.0]  # mean 65.0; against hashing +1, +3, -1, +1, +1
MINILM_TURNS_SGD = [67.0, 63.0, 63.5, 67.5, 68.5]  # mean 65.9; against hashing+turns +6, -2, +0.5, +0.5, -0.5
CHOSE = [{"source": s, "cv_weighted_f1": 60.0} for s in ("turns", "conversations", "both", "turns", "turns")]


def _use() -> dict[str, Any]:
    return {"results": [_row("MWOZ", "majority", None, f1=33.1, std=5.5),
                        _row("MWOZ", "hashing+shape", None, f1=53.1, std=4.1),
                        _row("SGD", "majority", None, f1=55.5, std=0.7),
                        _row("SGD", "hashing", HASHING_SGD)],
            "paper": [dict(r) for r in use.PAPER_ROWS]}


def _turns() -> dict[str, Any]:
    return {"results": [_row("MWOZ", "hashing+minilm+turns", None, f1=53.4, std=4.9, selected=CHOSE),
                        _row("SGD", "hashing+turns", TURNS_SGD, selected=CHOSE),
                        _row("SGD", "hashing+minilm+turns", MINILM_TURNS_SGD, selected=CHOSE[:2])],
            "paper": [dict(r) for r in use.PAPER_ROWS]}


def _save(results: Path, **files: dict[str, Any]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (results / f"{name.replace('_', '-')}.json").write_text(json.dumps(content))


def test_turn_rows_are_rendered_from_use_turns_json(tmp_path: Path) -> None:
    _save(tmp_path / "bench", use=_use(), use_turns=_turns())
    text = regenerate(tmp_path / "bench", tmp_path / "docs" / "benchmarks.md").read_text()
    source = "measured (`use-turns.json`, 5 % only)"
    assert f"| SGD | hashing+turns | 60.0 | 61.0 | 65.0 ± 2.8 | {source} |" in text
    assert f"| SGD | hashing+minilm+turns | 60.0 | 61.0 | 65.9 ± 2.2 | {source} |" in text
    # each dataset's turn rows follow its own rows, before the next dataset's
    lines = [line for line in text.splitlines() if line.startswith("| MWOZ |") or line.startswith("| SGD |")]
    order = [line.split(" | ")[1] for line in lines if "paper" not in line]
    assert order == ["majority", "hashing+shape", "hashing+minilm+turns", "majority", "hashing", "hashing+turns",
                     "hashing+minilm+turns"]
    assert TURNS_MISSING not in text and COMMANDS["use-turns"] in text
    # paired on the same splits, each against its conversation-label model and against hashing+turns
    assert "SGD `hashing+turns` against `hashing` +1.0 ± 1.3 (per split +1.0, +3.0, -1.0, +1.0, +1.0: " \
           "better on 4 of 5)" in text
    assert "SGD `hashing+minilm+turns` against `hashing+turns` +0.9 ± 2.7 (per split +6.0, -2.0, +0.5, +0.5, " \
           "-0.5: better on 3 of 5)" in text
    assert "MWOZ `hashing+minilm+turns` against" not in text  # MWOZ has no reference rows in these results
    assert "SGD `hashing+turns` 4 of 5, SGD `hashing+minilm+turns` 1 of 2" in text
    assert "- `turns`: turn-supervised" in text


def test_rows_without_per_split_scores_are_not_paired() -> None:
    old = _row("SGD", "hashing", None, f1=64.0, std=2.8)
    assert paired(_row("SGD", "hashing+turns", TURNS_SGD), old) is None
    assert paired(_row("SGD", "hashing+turns", TURNS_SGD), _row("SGD", "hashing", HASHING_SGD, n=999)) is None
    text = render({"use": {"results": [old], "paper": []},
                   "use-turns": {"results": [_row("SGD", "hashing+turns", TURNS_SGD)]}})
    assert "SGD `hashing+turns` against `hashing`: not paired (no per-split scores of the same splits), " \
           "means 65.0 / 64.0" in text


def test_report_without_use_turns_says_the_rows_are_missing(tmp_path: Path) -> None:
    _save(tmp_path / "bench", use=_use())
    text = regenerate(tmp_path / "bench", tmp_path / "docs" / "benchmarks.md").read_text()
    assert TURNS_MISSING in text and "`make bench`" in TURNS_MISSING
    assert "+turns |" not in text and "- `turns`:" not in text
    assert "SGD `hashing` 64.0 ± 2.8" in text


def test_bars_are_judged_on_the_served_row_not_the_best_row_on_the_test_splits() -> None:
    """The best of many rows on the same test splits is a selection effect: the bars are judged on
    the served featurizer's row, named before any split is scored, even where another row is better."""
    text = render({"use": _use(), "use-turns": _turns()})
    assert "judged on the served featurizer's row (`hashing`" in text
    assert "best `hashing+minilm+turns`" not in text
    clear = render({"use": {"results": [_row("MWOZ", "hashing", None, f1=60.0, std=0.5)], "paper": []},
                    "use-turns": {"results": [_row("MWOZ", "hashing+turns", None, f1=65.0, std=0.5)]}})
    assert "MWOZ `hashing` 60.0 ± 0.5 (ASAP 52.5: met, +7.5; SPUR 59.0: met, +1.0)" in clear
    assert "SGD `hashing`" not in clear
    close = render({"use": {"results": [_row("SGD", "hashing", None, f1=65.9, std=2.2)], "paper": []}})
    assert ("SGD `hashing` 65.9 ± 2.2 (ASAP 66.3: not met, -0.4, within one split std (2.2): not distinguishable; "
            "SPUR 72.6: not met, -6.7)") in close


def test_report_run_measures_the_turn_models_at_5_percent_in_the_same_command(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench report --run` runs `bench use` twice: the default models, then TURN_MODELS without a curve."""
    configs: list[UseConfig] = []

    def fake_use(config: UseConfig, progress: Any = None) -> dict[str, Any]:
        configs.append(config)
        source = _turns() if config.models == TURN_MODELS else _use()
        return {**source, "results": [r for r in source["results"] if r["model"] in config.models]}

    monkeypatch.setattr(use, "run_use", fake_use)
    for module, name in ((distill_fidelity, "run_fidelity"), (throughput, "run_throughput"),
                         (sampler_gain, "run_sampler"), (cost, "run_cost"), (throughput_cpu, "run_cpu_rounds"),
                         (detect, "run_detect")):
        monkeypatch.setattr(module, name, lambda *a, **k: {})
    monkeypatch.setattr(otlp_throughput, "with_otlp_row", lambda result, *a: result)
    for section in ("throughput_markdown", "distill_markdown", "sampler_markdown", "cost_markdown",
                    "detect_markdown"):
        monkeypatch.setattr(doc, section, lambda result: "(other benchmark)")  # their results are faked empty
    text = regenerate(tmp_path / "bench", tmp_path / "docs" / "benchmarks.md", run=True,
                      data_dir=tmp_path).read_text()
    assert [tuple(c.models) for c in configs] == [use.DEFAULT_MODELS, TURN_MODELS]
    assert list(configs[0].curve) == list(use.CURVE_FRACTIONS) and list(configs[1].curve) == []
    assert {c.data_dir for c in configs} == {tmp_path}
    saved = json.loads((tmp_path / "bench" / "use-turns.json").read_text())
    assert {r["model"] for r in saved["results"]} == set(TURN_MODELS) and "elapsed_s" in saved
    assert "| SGD | hashing+turns |" in text and TURNS_MISSING not in text
    assert ",".join(TURN_MODELS) in COMMANDS["use-turns"] and "--curve ''" in COMMANDS["use-turns"]
