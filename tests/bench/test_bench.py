"""Smoke tests: every benchmark at tiny scale prints the documented JSON shape with sane numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.distill_fidelity import FidelityConfig, run_fidelity
from bench.doc import KEEP, PAGES, kept_subsections, paginate, regenerate, render, split_sections
from bench.doc_markdown import FAUST_ERA, distill_markdown, throughput_markdown
from bench.throughput import ThroughputConfig, run_throughput
from bench.throughput_input import distinct_texts_per_conversation, uss_dialogues, uss_messages
from bench.turns import turn_event_messages, whole_conversations
from bench.use import PAPER_ROWS, UseConfig, run_use, split_indices
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, Turn, encode
from monitor.contracts.settings import REPO_ROOT

runner = CliRunner()


def test_use_cli_json_shape(shared_data: Path) -> None:
    result = runner.invoke(app, ["use", "--data", str(shared_data), "--datasets", "MWOZ", "--models", "hashing",
                                 "--splits", "2", "--curve", "0.4", "--limit", "120", "--no-dsat", "--json",
                                 "--quiet"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["dsat"] == []  # --no-dsat: Table 1 rows only (tests/bench/test_use_whole.py runs the DSAT protocol)
    table1 = [r for r in out["results"] if r["protocol"] == "table1"]
    assert table1[0] | {"dataset": "MWOZ", "model": "hashing", "train_fraction": 0.05, "splits": 2} == table1[0]
    for row in out["results"]:
        assert 0 <= row["precision"] <= 100 and 0 <= row["recall"] <= 100 and 0 <= row["weighted_f1"] <= 100
    assert {r["model"] for r in out["paper"]} == {"Lin-ada", "ASAP", "SPUR"}
    assert all("paper" in r["source"].lower() for r in out["paper"])


def test_use_learns_something(shared_data: Path) -> None:
    """With 40 % of 200 dialogues for training, hashing features beat always predicting SAT."""
    out = run_use(UseConfig(data_dir=shared_data, datasets=["SGD"], models=["hashing"], splits=2, curve=[0.4],
                            limit=200))
    curve = next(r for r in out["results"] if r["protocol"] == "curve")
    assert curve["weighted_f1"] > 40


def test_split_indices_never_overlap() -> None:
    train, test = split_indices(100, train_fraction=0.05, test_fraction=0.8, seed=3)
    assert len(train) == 5 and len(test) == 80 and not set(train) & set(test)
    with pytest.raises(Exception, match="train_fraction"):
        split_indices(100, train_fraction=0.5, test_fraction=0.8, seed=0)


def test_distill_fidelity_shape() -> None:
    out = run_fidelity(FidelityConfig(labels=[300], featurizers=["hashing"], test_size=300, uss=False))
    assert "uss" not in out
    assert "simulated" in out["teacher"].lower()
    rows = out["results"]
    assert {r["labels"] for r in rows} == {300} and all("item" in r and "auc" in r for r in rows)
    aucs = [r["auc"] for r in rows if r["auc"] is not None]
    assert len(aucs) >= 10 and min(aucs) > 0.5
    assert out["summary"][0]["macro_auc"] > 0.85


def test_throughput_messages_are_real_dialogues_with_fresh_ids(shared_data: Path, tmp_path: Path) -> None:
    messages = uss_messages(shared_data, 50, seed=1, prefix="run")
    ids = [key.decode() for key, _ in messages]
    assert ids == [f"run-{i}" for i in range(50)]
    conversations = [Conversation.model_validate_json(value) for _, value in messages]
    assert all(c.conversation_id == i for c, i in zip(conversations, ids, strict=True))
    assert sum(len(c.turns) for c in conversations) / 50 > 5  # whole dialogues, not single turns
    again = [Conversation.model_validate_json(v) for _, v in uss_messages(shared_data, 50, seed=1, prefix="x")]
    assert [c.turns for c in again] == [c.turns for c in conversations]  # same seed: same dialogues, new ids
    assert again[0].conversation_id == "x-0"
    with pytest.raises(ConfigError, match="fewer than the 1000000 conversations"):
        uss_messages(shared_data, 1_000_000, seed=1, prefix="run")
    with pytest.raises(ConfigError, match="no USS files"):
        uss_messages(tmp_path, 10, seed=1, prefix="run")


def test_distinct_texts_count_repeats_only_within_a_batch() -> None:
    def message(cid: str, *user: str) -> tuple[bytes, bytes]:
        turns = [Turn(index=i, role="user", text=t) for i, t in enumerate(user)]
        return cid.encode(), encode(Conversation(conversation_id=cid, turns=turns))

    messages = [message("a", "hi", "thanks"), message("b", "hi", "bye"), message("c", "hi")]
    # the user turns after the first carry no assistant context, so only user texts count
    assert distinct_texts_per_conversation(messages, batch=3) == pytest.approx(3 / 3)  # hi, thanks, bye
    assert distinct_texts_per_conversation(messages, batch=1) == pytest.approx(5 / 3)  # 2 + 2 + 1


def test_throughput_markdown_names_source_targets_and_cold_judge() -> None:
    result = {"conversations": 10, "source": "uss", "uss_files": ["MWOZ", "SGD"], "partitions": 4,
              "turns_per_conversation": 20.0, "chars_per_conversation": 900.0,
              "distinct_texts_per_conversation": 18.5, "batch": 256, "raw_consume_per_s": 1000.0,
              "monitor_per_s": {"hashing": 50.0, "minilm": 9.0}, "ratio": {"hashing": 0.05, "minilm": 0.009},
              "featurize_per_s": {"hashing": 100.0, "minilm": 10.0}, "minilm_encode_fraction": 0.9,
              "worker_batch_mean": {"minilm": 200.0}, "worker_batch_seconds_mean": {"minilm": 20.0},
              "judge": {"per_s": 30.0, "p50_ms": 201.0, "p99_ms": 240.0, "cold_ms": 480.0, "p99_with_cold_ms": 470.0,
                        "concurrency": 8, "server_latency_ms": 200.0}}
    text = throughput_markdown(result)
    assert "USS dialogues of MWOZ, SGD" in text and "about 18.50 texts per conversation" in text
    assert "reads real dialogues" in text
    assert "not met (5.00 %; the featurizer alone, in-process, reaches 10.00 %)" in text
    assert "`minilm` at >= 90 % of its standalone encode rate: met (90.0 %)" in text
    assert "`minilm` 200.0 conversations, 20.000 s each" in text
    assert "| p99 latency with the first round | 470.0 ms |" in text
    old = {**result, "source": "simulator", "judge": {k: v for k, v in result["judge"].items()
                                                      if k not in ("cold_ms", "p99_with_cold_ms")}}
    text = throughput_markdown(old)  # results saved before these keys existed still render
    assert "from the simulator" in text and "reads real dialogues" not in text and "first round" not in text


def test_turn_events_interleave_thousands_of_open_conversations(shared_data: Path) -> None:
    dialogues = uss_dialogues(shared_data)
    messages = turn_event_messages(dialogues, len(dialogues) + 50, seed=1, prefix="t")
    events = [orjson.loads(v) for _, v in messages]
    ids = [f"t-{i}" for i in range(len(dialogues) + 50)]
    first_round = events[:len(ids)]  # turn 0 of every conversation before any turn 1: all open at once
    assert [e["conversation_id"] for e in first_round] == ids and {e["turn_index"] for e in first_round} == {0}
    ends = [e for e in events if e.get("type") == "end"]
    assert [e["conversation_id"] for e in ends] == ids  # fresh ids, dialogues reused past the files' count
    counts = {e["conversation_id"]: e["turn_count"] for e in ends}
    assert sum(counts.values()) == len(events) - len(ends)
    rebuilt = whole_conversations(messages)
    assert len(rebuilt) == len(ids)
    assert [t.index for t in Conversation.model_validate_json(rebuilt[0][1]).turns] == list(range(counts["t-0"]))


def _throughput(shared_data: Path, mode: str, **kw: object) -> dict:
    settings: dict = {"workers": 2, "warmup": 10, "featurizers": ["hashing"], "train_labels": 200,
                      "judge_conversations": 24, "concurrency": 4, "judge_latency_s": 0.02, "data_dir": shared_data}
    return run_throughput(ThroughputConfig(mode=mode, **{**settings, **kw}))  # type: ignore[arg-type]


@pytest.mark.integration
def test_throughput_shape_on_turn_events(shared_data: Path) -> None:
    out = _throughput(shared_data, "turns", conversations=300, judge_conversations=0)
    assert out["mode"] == "turns" and out["worker_processes"] == 2 and out["messages_per_conversation"] > 5
    per_message = out["raw_consume_messages_per_s"] / out["messages_per_conversation"]
    assert out["raw_consume_per_s"] == pytest.approx(per_message)
    assert 0 < out["ratio"]["hashing"] < 1  # nothing beats the bare consumer
    assert out["engine"] == "checkpoint"
    # append-only sessions: the engine's changelog holds each turn about once, plus headers and tombstones
    assert 0.5 < out["changelog_to_conversation"]["hashing"] < 4
    assert 100 < out["score_record_bytes"]["hashing"] <= 600
    assert out["bars"]["turns_at_least_10pct_of_raw"] == {"ratio": out["ratio"]["hashing"], "bar": 0.10,
                                                          "met": out["ratio"]["hashing"] >= 0.10}
    assert not {k for k in out if "floor" in k}, out.keys()  # no framework floor: that was the faust engine's


@pytest.mark.integration
def test_throughput_shape_on_whole_conversations(shared_data: Path) -> None:
    out = _throughput(shared_data, "conversations", conversations=100)
    assert out["source"] == "uss" and out["turns_per_conversation"] > 5 and out["messages_per_conversation"] == 1
    assert out["raw_consume_per_s"] > 0 and out["monitor_per_s"]["hashing"] > 0
    assert out["ratio"]["hashing"] == pytest.approx(out["monitor_per_s"]["hashing"] / out["raw_consume_per_s"])
    assert 0 < out["ratio"]["hashing"] < 1
    bar = out["bars"]["conversations_3x_pre18"]
    assert bar["same_run"] is False and bar["pre18_recorded_per_s"] == 409.6
    judge = out["judge"]
    assert judge["concurrency"] == 4 and judge["per_s"] > 0
    assert 20 <= judge["p50_ms"] <= judge["p99_ms"]  # never faster than the server's fixed latency
    assert out["peak_rss_mb"] > 50
    assert 1 <= out["worker_batch_mean"]["hashing"] <= 256 and out["worker_batch_seconds_mean"]["hashing"] > 0


def test_report_renders_saved_results(tmp_path: Path) -> None:
    results = tmp_path / "bench"
    results.mkdir()
    use = {"results": [{"dataset": "MWOZ", "model": "hashing", "protocol": "table1", "train_fraction": 0.05,
                        "test_fraction": 0.8, "precision": 50.0, "recall": 51.0, "weighted_f1": 49.5,
                        "weighted_f1_std": 1.0, "splits": 5},
                       {"dataset": "MWOZ", "model": "hashing@char3-5", "protocol": "table1", "train_fraction": 0.05,
                        "test_fraction": 0.8, "precision": 50.0, "recall": 51.0, "weighted_f1": 49.8,
                        "weighted_f1_std": 1.0, "splits": 5},
                       {"dataset": "MWOZ", "model": "majority", "protocol": "table1", "train_fraction": 0.05,
                        "test_fraction": 0.8, "precision": 30.0, "recall": 54.0, "weighted_f1": 33.1,
                        "weighted_f1_std": 5.5, "splits": 5},
                       *[{"dataset": "MWOZ", "model": model, "protocol": "table1", "train_fraction": 0.05,
                          "test_fraction": 0.8, "precision": 50.0, "recall": 51.0, "weighted_f1": f1,
                          "weighted_f1_std": 1.0, "splits": 5}
                         for model, f1 in (("minilm@torch", 45.8), ("minilm", 46.3), ("hashing+minilm@torch", 47.0),
                                           ("hashing+minilm", 45.5))]],
           "paper": [dict(r) for r in PAPER_ROWS]}
    (results / "use.json").write_text(json.dumps(use))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks-calibration.md").write_text("calibration table here\n")
    doc = regenerate(results, tmp_path / "docs" / "benchmarks.md")
    text = doc.read_text()
    assert "49.5" in text and "**paper** (SPUR Table 1)" in text and "72.6" in text
    assert "| MWOZ | majority | 30.0 | 54.0 | 33.1 ± 5.5 | baseline (measured) |" in text
    assert "MWOZ `hashing` 49.5 ± 1.0 (ASAP 52.5: not met, -3.0; SPUR 59.0: not met, -9.5)" in text  # served row
    assert "MWOZ 49.8 / 49.5; largest loss 0.3 points (bar: <= 0.5)" in text
    assert ("MWOZ `minilm` 45.8 / 46.3, MWOZ `hashing+minilm` 47.0 / 45.5; largest loss 1.5 points (bar: <= 1; "
            "not met: keep CONVMON_EMBEDDING_BACKEND=torch)") in text
    assert "Learning curve: not in these results" in text
    assert "calibration table here" not in text and "(benchmarks-calibration.md)" in text  # linked, not copied
    assert "_Not run yet._" in text
    assert render({}).count("_Not run yet._") == 7  # use, both throughputs, distill, sampler, cost, detect


def test_report_keeps_sections_without_saved_results(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "benchmarks.md").write_text(render({"use": {"results": [], "paper": [dict(PAPER_ROWS[0])]}}))
    (docs / "benchmarks-calibration.md").write_text("## Calibration: new\n\nnew numbers\n")
    text = regenerate(tmp_path / "empty", docs / "benchmarks.md").read_text()  # no saved results at all
    assert "29.1" in text and text.count("_Not run yet._") == 2  # use kept from the old doc; distill, sampler
    assert "new numbers" not in text and text.count("## Calibration") == 1
    assert (docs / "benchmarks-speed.md").read_text().count("_Not run yet._") == 2  # both throughputs
    assert (docs / "benchmarks-alerting.md").read_text().count("_Not run yet._") == 2  # cost, detect


def test_the_pages_split_the_sections_and_a_regeneration_keeps_each_where_it_was(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    pages = paginate(render({}))
    assert set(pages) == {"benchmarks.md", "benchmarks-speed.md", "benchmarks-alerting.md"}
    assert "## Spike detection" in pages["benchmarks-alerting.md"]
    assert "## Spike detection" not in pages["benchmarks.md"]
    assert "## Speed: whole-conversation input" in pages["benchmarks-speed.md"]
    for page, text in pages.items():
        (docs / page).write_text(text.replace("_Not run yet._", f"kept on {page}"))
    regenerate(tmp_path / "empty", docs / "benchmarks.md")
    for page in pages:
        assert f"kept on {page}" in (docs / page).read_text()


def test_a_regenerated_section_keeps_the_subsections_written_by_hand(tmp_path: Path) -> None:
    title = "Accuracy: SPUR Table 1 protocol on USS"
    old = (f"## {title}\n\nold generated table\n\n### Old generated part\nstale numbers\n\n"
           f"### Tried by hand\n{KEEP}\nhand-measured 0.671\n")
    text = render({"use": {"results": [], "paper": [dict(PAPER_ROWS[0])]}}, previous={title: old})
    section = split_sections(text)[title]
    assert "hand-measured 0.671" in section and "### Tried by hand" in section
    assert "stale numbers" not in section and "old generated table" not in section


def test_the_committed_pages_are_short_and_mark_their_hand_written_measurements() -> None:
    """What `bench report` would drop on the next run is marked, so it is kept (the latency runs, the two engines'
    CPU rounds); each page
    stays readable (20 KB at most) and carries no issue numbers."""
    for page in ("benchmarks.md", *PAGES):
        text = (REPO_ROOT / "docs" / page).read_text(encoding="utf-8")
        assert len(text.encode()) <= 20_000, page
        assert re.search(r"(issue |\(|\s)#\d\d", text) is None, page
    sections = split_sections((REPO_ROOT / "docs" / "benchmarks-speed.md").read_text(encoding="utf-8"))
    kept = {title: [k.splitlines()[0] for k in kept_subsections(text)] for title, text in sections.items()}
    assert kept["Speed: distilled path vs raw consume, and the judge path"] == [
        "### Latency: event to score", "### The two engines: CPU per conversation",
        "### Against 198e016, the last faust release"]


def test_use_baselines_on_the_same_splits(shared_data: Path) -> None:
    """Majority predicts the training split's top label; stratified draws labels; neither reads text."""
    out = run_use(UseConfig(data_dir=shared_data, datasets=["SGD", "CCPE"], models=["majority", "stratified"],
                            splits=3, curve=[], limit=300))
    rows = {(r["dataset"], r["model"]): r for r in out["results"]}
    assert set(rows) == {(d, m) for d in ("SGD", "CCPE") for m in ("majority", "stratified")}
    assert {r["features"] for r in rows.values()} == {""}
    for dataset in ("SGD", "CCPE"):
        majority = rows[(dataset, "majority")]
        # SAT is the majority label of both files; predicting it has recall = its share of the test set
        assert 50 < majority["recall"] < 80
        assert majority["weighted_f1"] < majority["recall"]
        assert 30 < rows[(dataset, "stratified")]["weighted_f1"] < 75
    assert "baseline" in out["models"]["majority"] and "baseline" in out["models"]["stratified"]


def test_distill_fidelity_with_the_uss_human_teacher(shared_data: Path) -> None:
    """One held-out set of real dialogues scores every training size of the stand-in DSAT item."""
    out = run_fidelity(FidelityConfig(labels=[100], featurizers=["shape"], test_size=100, data_dir=shared_data,
                                      uss_labels=[50, 400], uss_test_size=400, uss_featurizers=["hashing"]))
    assert {s["featurizer"] for s in out["summary"]} == {"shape"}
    uss = out["uss"]
    assert "rating <= 2" in uss["teacher"] and uss["files"] == ["MWOZ", "SGD", "CCPE"]
    rows = {r["labels"]: r for r in uss["results"]}
    assert set(rows) == {50, 400} and {r["item"] for r in rows.values()} == {"dsat.dissatisfied_turn"}
    assert all(r["test_positives"] == rows[50]["test_positives"] for r in rows.values())  # one held-out set
    assert 0.1 < uss["test_positive_rate"] < 0.9 and rows[400]["train_positives"] > rows[50]["train_positives"]
    # trained and scored; how well is the benchmark's finding (about chance with hashing), not a test bar
    assert rows[400]["status"] == "trained" and 0 <= rows[400]["auc"] <= 1
    text = distill_markdown(out)
    assert "A harder teacher on real text" in text and "| hashing | 400 |" in text
    with pytest.raises(ConfigError, match="needs 2400 dialogues"):
        run_fidelity(FidelityConfig(labels=[100], featurizers=["hashing"], test_size=100, data_dir=shared_data,
                                    uss_files=["CCPE"], uss_labels=[1400], uss_test_size=1000))


def test_cli_default_models_are_the_benchmark_defaults() -> None:
    from bench.cli import USE_CURVE, USE_FULL_MODELS, USE_MODELS
    from bench.use import CURVE_FRACTIONS, FULL_MODELS, QUICK_MODELS

    assert USE_MODELS.split(",") == list(QUICK_MODELS) and USE_FULL_MODELS.split(",") == list(FULL_MODELS)
    assert [float(f) for f in USE_CURVE.split(",")] == list(CURVE_FRACTIONS)


def test_targets_render_as_sentences_with_their_measured_values() -> None:
    from bench.doc_markdown import throughput_markdown

    text = throughput_markdown({"mode": "turns", "raw_consume_per_s": 100.0, "bars": {
        "turns_at_least_10pct_of_raw": {"ratio": 0.0129, "met": False},
        "conversations_3x_pre18": {"speedup": 3.2, "met": True, "same_run": False, "workers": 2},
        "score_record_at_most_600_bytes": {"hashing": {"bytes": 351.6, "met": True}}}})
    assert ("Targets: turn events at >= 10 % of raw consume: not met (ratio 0.0129); whole conversations "
            "at >= 3x the earlier monitor's recorded rate: not proven (speedup 3.2 against a recorded one-worker "
            "rate, not the same run; 2 worker(s) here); score "
            "record <= 600 bytes: `hashing` met (bytes 352).") in text


def test_results_saved_by_the_removed_faust_engine_say_so_and_lose_their_floor_rows() -> None:
    """Results saved before the checkpoint engine became the only one carry no ``engine``; they render, marked as
    the faust engine's, without the framework floor (faust with no work) they measured."""
    old = {"mode": "turns", "raw_consume_per_s": 1000.0, "framework_floor_per_s": 70.0,
           "framework_floor_ratio": 0.07, "share_of_floor": {"hashing": 0.58},
           "framework_floor_machine_cpu_cores": {"workers": 1.5, "broker": 0.1, "driver": 0.2},
           "monitor_per_s": {"hashing": 40.0}, "ratio": {"hashing": 0.04},
           "bars": {"turns_at_least_10pct_of_raw": {"ratio": 0.04, "bar": 0.10, "floor_ratio": 0.07, "met": False}}}
    text = throughput_markdown(old)
    assert FAUST_ERA in text and "floor" not in text.replace(FAUST_ERA, "")
    assert "turn events at >= 10 % of raw consume: not met (ratio 0.04)." in text
    assert FAUST_ERA not in throughput_markdown({**old, "engine": "checkpoint"})


def test_each_mode_default_fits_the_shared_uss_dialogues(shared_data: Path) -> None:
    """`make bench` runs both modes on their defaults: whole conversations are each USS dialogue at most once
    (the default of 10,000 for both made the full run stop at the whole-conversation benchmark)."""
    for mode in ("turns", "conversations"):
        config = ThroughputConfig(mode=mode, data_dir=shared_data)
        assert config.n_conversations == (10_000 if mode == "turns" else 2500)
    whole = ThroughputConfig(mode="conversations", data_dir=shared_data).n_conversations
    assert len(uss_messages(shared_data, whole, seed=0, prefix="c")) == whole
    assert ThroughputConfig(conversations=40, mode="conversations").n_conversations == 40
