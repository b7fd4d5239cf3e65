"""End to end through the CLI on 30 real MWOZ dialogues, with the test server standing in for the LLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from distill.rubrics.cli import app
from monitor.contracts.rubric_set import RubricSet, dump_rubric_set, load_rubric_set
from monitor.contracts.settings import REPO_ROOT
from tests.support.strict_json import loads

runner = CliRunner()


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def mwoz(shared_data: Path) -> Path:
    return shared_data / "uss" / "MWOZ.txt"


def test_learn_spur_writes_a_versioned_set_and_resumes_from_the_cache(judge_env: Path, mwoz: Path, server) -> None:
    out = judge_env / "learned.yaml"
    first = invoke("learn", "--labeled", str(mwoz), "--limit", "30", "--out", str(out), "--batch-size", "20")
    rubric = load_rubric_set(out, REPO_ROOT / "prompts")
    assert rubric.id == "learned-mwoz"
    assert rubric.by_polarity("sat") and rubric.by_polarity("dsat")
    assert len(rubric.by_polarity("sat")) <= 10
    provenance = rubric.provenance
    assert provenance["method"] == "spur" and provenance["model"] == "gpt-4o-mini"
    assert provenance["data"]["file"] == "MWOZ.txt" and len(provenance["data"]["sha256"]) == 64
    assert provenance["data"]["counts"] == {"SAT": 11, "DSAT": 18, "NEUTRAL": 1}
    assert provenance["parameters"]["batch_size"] == 20
    extraction_calls = sum("<REASONS>" in str(r["messages"][-1]["content"]) for r in server.requests)
    assert extraction_calls == 29  # one per SAT/DSAT conversation; the neutral one is dropped
    # the product's domain reaches every extraction / summarization prompt
    assert all("restaurant and hotel booking" in r["messages"][0]["content"] for r in server.requests)
    made = len(server.requests)
    assert f"{made} LLM calls, 0 from cache" in first

    second = invoke("learn", "--labeled", str(mwoz), "--limit", "30", "--out", str(out), "--batch-size", "20")
    assert len(server.requests) == made  # everything replayed from the cache
    assert f"0 LLM calls, {made} from cache" in second
    assert load_rubric_set(out, REPO_ROOT / "prompts").items == rubric.items


def test_dry_run_counts_calls_and_cost_without_calling(judge_env: Path, mwoz: Path, server) -> None:
    output = invoke("learn", "--labeled", str(mwoz), "--limit", "30", "--dry-run", "--method", "rubicon")
    assert server.requests == []
    assert "29 labelled conversations (11 SAT, 18 DSAT, 1 neutral dropped)" in output
    assert "extraction" in output and "pool scoring" in output
    total = [line for line in output.splitlines() if "total" in line][0]
    assert float(total.split("│")[-2]) > 0  # priced: gpt-4o-mini is in judge_prices


def test_rubicon_selects_from_the_pool_and_evaluate_compares_sets(
    judge_env: Path, mwoz: Path, server, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = judge_env / "rubicon.yaml"
    invoke("learn", "--labeled", str(mwoz), "--limit", "30", "--out", str(out), "--method", "rubicon",
           "--batch-size", "10", "--sat-budget", "3", "--dsat-budget", "2")
    rubric = load_rubric_set(out, REPO_ROOT / "prompts")
    selection = rubric.provenance["selection"]
    assert set(rubric.item_ids) <= set(selection["pool_ids"])
    assert len(rubric.by_polarity("sat")) <= 3 and len(rubric.by_polarity("dsat")) <= 2
    assert selection["alpha"] in (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
    assert set(selection["cv_balanced_accuracy"]) == {"0.0", "0.25", "0.5", "1.0", "2.0", "4.0"}
    assert selection["scored_conversations"] == 29

    report = loads(invoke("evaluate", "--labeled", str(mwoz), "--limit", "30", "--set", str(out),
                               "--set", "spur-mwoz", "--bootstrap", "200", "--json"))
    assert [s["name"] for s in report["sets"]] == [str(out), "spur-mwoz"]
    for entry in report["sets"]:
        assert entry["conversations"] + entry["failed"] == 29
        metrics, ci = entry["metrics"], entry["ci95"]
        for name in ("accuracy", "precision", "recall", "f1", "yield_at_0.9"):
            assert 0.0 <= metrics[name] <= 1.0
            assert ci[name][0] <= ci[name][1]
        assert -1.0 <= metrics["delta_netsat"] <= 1.0
    assert report["sets"][0]["threshold_r"] == pytest.approx(selection["threshold_r"])
    monkeypatch.setenv("COLUMNS", "250")
    table = invoke("evaluate", "--labeled", str(mwoz), "--limit", "30", "--set", "spur-mwoz", "--bootstrap", "0")
    assert "spur-mwoz@1" in table and "yield_at_0.9" in table


def test_jsonl_conversations_are_redacted_before_any_call(judge_env: Path, server) -> None:
    rows = [
        {"conversation_id": "a", "label": "SAT",
         "turns": [{"index": 0, "role": "user", "text": "thanks, mail bob@example.com"}]},
        {"conversation_id": "b", "feedback": {"thumbs": "down"},
         "turns": [{"index": 0, "role": "user", "text": "again? I already said, call +1 (415) 555-0100"}]},
    ]
    data = judge_env / "labeled.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    invoke("learn", "--labeled", str(data), "--out", str(judge_env / "x.yaml"))
    sent = json.dumps(server.requests)
    assert "bob@example.com" not in sent and "555-0100" not in sent
    assert "[EMAIL]" in sent and "[PHONE]" in sent


def test_apply_installs_the_set_and_refuses_a_changed_version(judge_env: Path, tmp_path: Path) -> None:
    base = load_rubric_set("spur-mwoz", REPO_ROOT / "prompts")
    learned = RubricSet.model_validate({**base.model_dump(), "id": "learned-x", "version": "20240101-abcd1234"})
    source = tmp_path / "learned.yaml"
    dump_rubric_set(learned, source)
    target_dir = tmp_path / "rubrics"
    output = invoke("apply", str(source), "--rubrics-dir", str(target_dir))
    assert (target_dir / "learned-x.yaml").is_file()
    assert f"CONVMON_RUBRIC_SET={(target_dir / 'learned-x.yaml').resolve()}" in output

    changed = yaml.safe_load(source.read_text())
    changed["items"][0]["description"] = "Something else entirely."
    source.write_text(yaml.safe_dump(changed))
    result = runner.invoke(app, ["apply", str(source), "--rubrics-dir", str(target_dir)])
    assert result.exit_code == 2
    assert "already holds learned-x@20240101-abcd1234 with different content" in result.output


def test_learn_rejects_a_file_without_both_classes(judge_env: Path) -> None:
    data = judge_env / "only_sat.jsonl"
    data.write_text(json.dumps({"conversation_id": "a", "label": "SAT",
                                "turns": [{"index": 0, "role": "user", "text": "thanks"}]}), encoding="utf-8")
    result = runner.invoke(app, ["learn", "--labeled", str(data), "--dry-run"])
    assert result.exit_code == 2
    assert "needs SAT and DSAT conversations" in result.output


def test_a_failed_run_resumes_from_what_it_finished(
    judge_env: Path, mwoz: Path, server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVMON_JUDGE_CONCURRENCY", "1")  # one call at a time: the failure point is exact
    monkeypatch.setenv("CONVMON_JUDGE_MAX_RETRIES", "0")
    server.script(*[server.default] * 5, "500")  # five extraction answers, then a failure
    out = judge_env / "r.yaml"
    failed = runner.invoke(app, ["learn", "--labeled", str(mwoz), "--limit", "10", "--out", str(out)])
    assert failed.exit_code == 2 and "the judge endpoint failed 1 times" in failed.output
    assert not out.exists()
    resumed = invoke("learn", "--labeled", str(mwoz), "--limit", "10", "--out", str(out))
    assert "5 from cache" in resumed
    assert load_rubric_set(out, REPO_ROOT / "prompts").items


def test_evaluate_in_logprobs_mode_scores_ten_times_p_yes_and_replays_from_the_cache(
    judge_env: Path, mwoz: Path, server
) -> None:
    """`rubrics evaluate --mode logprobs`; the cache keeps the top logprobs, so a rerun is free."""
    server.default = "good"  # the stand-in judge answers yes/no with top logprobs
    args = ("evaluate", "--labeled", str(mwoz), "--limit", "12", "--set", "spur-mwoz", "--mode", "logprobs",
            "--bootstrap", "0", "--json")
    first = loads(invoke(*args))
    assert first["mode"] == "logprobs" and first["llm"]["calls"] > 0
    entry = first["sets"][0]
    assert entry["conversations"] == 11 and entry["failed"] == 0  # the loader keeps 11 of these rows (29 of 30 above)
    assert all(request.get("logprobs") and request["max_tokens"] == 1 for request in server.requests)
    assert 0.0 <= entry["metrics"]["accuracy"] <= 1.0 and -1.0 <= entry["metrics"]["delta_netsat"] <= 1.0
    calls = len(server.requests)
    again = loads(invoke(*args))
    assert len(server.requests) == calls and again["llm"]["cache_hits"] == first["llm"]["calls"]
    assert again["sets"][0]["metrics"] == entry["metrics"]
