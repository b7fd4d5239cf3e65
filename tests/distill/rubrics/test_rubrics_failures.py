"""`convmon rubrics learn / evaluate` against a judge that misbehaves: each failure is said
clearly, with the exit code, and never silently turned into a result."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from distill.rubrics.cli import app
from distill.rubrics.extract import EXTRACTION_MAX_TOKENS
from distill.rubrics.summarize import SUMMARIZATION_MAX_TOKENS
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import REPO_ROOT
from monitor.tools.stand_in_judge import answer
from tests.support.rubric_stand_in import reply, rubric_text
from tests.support.strict_json import loads

runner = CliRunner()
Reply = tuple[int, dict[str, Any], dict[str, str]]
NAMES = {"Gratitude", "Farewell", "Booking Acceptance", "Request Fulfillment", "Praise", "Repetition",
         "Request Flexibility", "Clarification", "Ignored", "Negative Feedback"}


@pytest.fixture
def mwoz(shared_data: Path) -> Path:
    return shared_data / "uss" / "MWOZ.txt"


def run(*args: str) -> Result:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no numpy "mean of empty slice" on the way
        return runner.invoke(app, list(args), catch_exceptions=False)


def stage(body: dict[str, Any]) -> str:
    content = str(body["messages"][-1]["content"])
    return "extraction" if "<REASONS>" in content else "summarization" if "<Rubric>" in content else "scoring"


def cut(body: dict[str, Any]) -> Reply:
    text = rubric_text(body)
    return reply(body, text[: len(text) // 3], "length")


def test_cut_off_answers_are_asked_again_with_a_larger_limit(judge_env: Path, mwoz: Path, server) -> None:
    def first_limit_cut_off(body: dict[str, Any]) -> Reply:
        return cut(body) if body["max_tokens"] in (EXTRACTION_MAX_TOKENS, SUMMARIZATION_MAX_TOKENS) else \
            reply(body, rubric_text(body))

    server.default = first_limit_cut_off
    out = judge_env / "learned.yaml"
    result = run("learn", "--labeled", str(mwoz), "--limit", "30", "--out", str(out))
    assert result.exit_code == 0, result.output
    rubric = load_rubric_set(out, REPO_ROOT / "prompts")
    assert {i.name for i in rubric.items} <= NAMES  # no "Th" / "The use" from a cut-off answer
    limits = sorted({(stage(b), b["max_tokens"]) for b in server.requests})
    assert limits == [("extraction", 400), ("extraction", 800), ("summarization", 1200), ("summarization", 2400)]
    assert rubric.provenance["stats"]["llm"]["cut_off"] == 29 + 2
    assert "dropped" not in result.output


def test_answers_cut_off_twice_are_dropped_and_the_run_exits_3(judge_env: Path, mwoz: Path, server) -> None:
    def dsat_extraction_cut_off(body: dict[str, Any]) -> Reply:
        content = str(body["messages"][-1]["content"])
        return cut(body) if stage(body) == "extraction" and "**dissatisfied**" in content else \
            reply(body, rubric_text(body))

    server.default = dsat_extraction_cut_off
    out = judge_env / "learned.yaml"
    result = run("learn", "--labeled", str(mwoz), "--limit", "30", "--out", str(out))
    assert result.exit_code == 3, result.output
    assert "extraction: 18 of 29 answers dropped (18: cut off at the output limit even with 800 tokens)" \
        in result.stderr
    assert "more than --max-dropped 0.1, so nothing was written" in result.stderr
    assert not out.exists()

    accepted = run("learn", "--labeled", str(mwoz), "--limit", "30", "--out", str(out), "--max-dropped", "1")
    assert accepted.exit_code == 0, accepted.output
    assert "dropped: extraction: 18 of 29 answers dropped" in accepted.stderr
    rubric = load_rubric_set(out, REPO_ROOT / "prompts")
    assert rubric.by_polarity("sat") and not rubric.by_polarity("dsat")  # only the SAT reasons were usable
    assert rubric.provenance["stats"]["dropped"]["extraction"]["answers"] == 29


def test_every_summarization_answer_cut_off_is_an_error(judge_env: Path, mwoz: Path, server) -> None:
    server.default = lambda body: cut(body) if stage(body) == "summarization" else reply(body, rubric_text(body))
    result = run("learn", "--labeled", str(mwoz), "--limit", "30", "--out", str(judge_env / "x.yaml"))
    assert result.exit_code == 2, result.output
    assert "summarization: every one of the 2 answers was unusable, so nothing was learned" in result.stderr
    assert "cut off at the output limit even with 2400 tokens" in result.stderr


def test_rubicon_says_the_judges_answers_were_unusable(judge_env: Path, mwoz: Path, server) -> None:
    server.default = lambda body: reply(body, rubric_text(body) if stage(body) != "scoring" else
                                        answer(body, "malformed")[0])
    result = run("learn", "--labeled", str(mwoz), "--limit", "30", "--out", str(judge_env / "x.yaml"),
                 "--method", "rubicon", "--score-mode", "spur")
    assert result.exit_code == 2, result.output
    assert "pool scoring: every one of the 29 answers was unusable, so nothing was learned" in result.stderr
    assert "29: judge answer unusable" in result.stderr
    assert "needs at least 2 SAT" not in result.output


@pytest.fixture
def labeled(judge_env: Path) -> Path:
    """Ten conversations; the one that mentions a zebra gets an unusable judge answer when the test says so."""
    texts = [("SAT", "thanks, that is great"), ("SAT", "perfect, thank you"), ("SAT", "awesome, bye"),
             ("SAT", "great, thanks a lot"), ("SAT", "thanks, the zebra is perfect"),
             ("DSAT", "wrong again, I already said"), ("DSAT", "useless and wrong"), ("DSAT", "terrible, again"),
             ("DSAT", "not helpful at all"), ("DSAT", "that is wrong, as i said")]
    path = judge_env / "holdout.jsonl"
    path.write_text("\n".join(json.dumps({"conversation_id": f"c{i}", "label": label, "turns": [
        {"index": 0, "role": "user", "text": text}, {"index": 1, "role": "assistant", "text": "ok"}]})
        for i, (label, text) in enumerate(texts)), encoding="utf-8")
    return path


def test_evaluate_with_every_answer_unusable_prints_null_and_exits_3(labeled: Path, server) -> None:
    server.default = "malformed"
    result = run("evaluate", "--labeled", str(labeled), "--set", "spur-mwoz", "--bootstrap", "50", "--json")
    assert result.exit_code == 3, result.output
    report = loads(result.stdout)["sets"][0]
    assert (report["conversations"], report["failed"]) == (0, 10)
    assert set(report["metrics"].values()) == {None}
    assert list(report["failures"].values()) == [10] and "judge answer unusable" in next(iter(report["failures"]))
    assert "spur-mwoz@1: 10 of 10 answers dropped (10: judge answer unusable" in result.stderr
    assert "every answer failed for spur-mwoz@1, whose metrics are undefined" in result.stderr
    table = run("evaluate", "--labeled", str(labeled), "--set", "spur-mwoz", "--bootstrap", "0")
    assert table.exit_code == 3 and "n/a" in table.stdout and "nan" not in table.stdout.lower()


def test_evaluate_exits_3_only_past_max_dropped(labeled: Path, server) -> None:
    def zebra_unusable(body: dict[str, Any]) -> Reply:
        zebra = "zebra" in json.dumps(body["messages"])
        return reply(body, answer(body, "malformed" if zebra else "good")[0])

    server.default = zebra_unusable
    ok = run("evaluate", "--labeled", str(labeled), "--set", "spur-mwoz", "--bootstrap", "50", "--json")
    assert ok.exit_code == 0, ok.output  # 1 of 10 dropped: within the default 0.1
    report = loads(ok.stdout)["sets"][0]
    assert (report["conversations"], report["failed"]) == (9, 1)
    assert report["metrics"]["accuracy"] is not None
    assert "dropped: spur-mwoz@1: 1 of 10 answers dropped" in ok.stderr
    strict = run("evaluate", "--labeled", str(labeled), "--set", "spur-mwoz", "--json", "--max-dropped", "0.05")
    assert strict.exit_code == 3 and loads(strict.stdout)["sets"][0]["failed"] == 1


def test_one_class_metrics_are_null_not_nan(labeled: Path, judge_env: Path, server) -> None:
    only_sat = judge_env / "sat.jsonl"  # load_labeled needs both classes; one DSAT row fails and is dropped
    rows = labeled.read_text().splitlines()
    only_sat.write_text("\n".join(rows[:5] + [rows[5].replace("wrong again", "zebra wrong again")]))
    server.default = lambda body: reply(body, answer(body, "malformed" if "zebra" in json.dumps(body["messages"])
                                                     else "good")[0])
    result = run("evaluate", "--labeled", str(only_sat), "--set", "spur-mwoz", "--json", "--max-dropped", "1")
    assert result.exit_code == 0, result.output
    metrics = loads(result.stdout)["sets"][0]["metrics"]
    assert metrics["delta_netsat"] is None and metrics["accuracy"] is not None


def test_a_set_without_sat_or_dsat_items_is_refused_before_any_call(labeled: Path, server) -> None:
    result = run("evaluate", "--labeled", str(labeled), "--set", "spur-mwoz", "--set", "maxims")
    assert result.exit_code == 2
    assert "maxims@1 has no SAT or DSAT items (12 maxim)" in result.output
    assert server.requests == []


def test_tables_are_not_cut_when_stdout_is_not_a_terminal(labeled: Path, judge_env: Path, server,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    long_path = judge_env / ("a-rubric-set-with-a-rather-long-file-name-" * 2 + "mwoz.yaml")
    long_path.write_text((REPO_ROOT / "prompts" / "rubrics" / "spur-mwoz.yaml").read_text())
    result = run("evaluate", "--labeled", str(labeled), "--set", str(long_path), "--bootstrap", "20")
    assert result.exit_code == 0, result.output
    assert str(long_path) in result.stdout and "…" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) > 80
