"""``convmon anchors``: the loader redacts and refuses bad lines, the owner re-judges when due and within the
budget, a changed judge is found on the right item, and the provenance reads the model the endpoint reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from distill.anchor_store import AnchorStore
from distill.store import LabelStore
from monitor.contracts.errors import ConfigError, JudgeError
from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.metrics_anchors import AnchorMetrics
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.scores import ScoreRecord
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.judge.build import build_judge
from monitor.judge.redact import Redactor
from monitor.judge.simulated import SimulatedJudge
from monitor.tools.anchors.load import read_anchors, simulated_anchors
from monitor.tools.anchors.provenance import prompt_hash, provenance, reported_model
from monitor.tools.anchors.runner import AnchorRunner

RUBRIC = load_rubric_set("spur-copilot", REPO_ROOT / "prompts")
PROVENANCE = {"judge": "simulated", "model": "simulated", "prompt_hash": "p1", "rubric_version": RUBRIC.key}


def write_set(path: Path, count: int = 90) -> Path:
    path.write_bytes(b"\n".join(simulated_anchors(RUBRIC, count, seed=3)) + b"\n")
    return path


def test_anchors_are_redacted_and_referenced(tmp_path: Path) -> None:
    line = ('{"conversation": {"conversation_id": "user-42", "metadata": {"email": "bob@example.com"}, "turns": '
            '[{"index": 0, "role": "user", "text": "mail bob@example.com please"}]}, '
            '"labels": {"dsat.repetition": true}}')
    (tmp_path / "a.jsonl").write_text(line + "\n")
    (anchor,) = read_anchors(tmp_path / "a.jsonl", RUBRIC, redactor=Redactor(), ref=lambda cid: f"ref-{len(cid)}")
    assert anchor.ref == anchor.conversation.conversation_id == "ref-7"
    assert "bob@example.com" not in anchor.conversation.model_dump_json()
    assert anchor.human == {"dsat.repetition": True}


@pytest.mark.parametrize(("content", "message"), [
    ('{"conversation": {"conversation_id": "a", "turns": [{"index": 0, "role": "user", "text": "x"}]}, '
     '"labels": {}}\nnot json\n', r"a\.jsonl:2: not JSON"),
    ('{"conversation": {"conversation_id": "a", "turns": []}, "labels": {}}',
     r"a\.jsonl:1: field 'conversation.turns'"),
    ('{"conversation": {"conversation_id": "a", "turns": [{"index": 0, "role": "user", "text": "x"}]}, '
     '"labels": {"dsat.nope": true}}', r"a\.jsonl:1: field 'labels': items \['dsat.nope'\] are not in rubric set"),
    ('{"conversation": {"conversation_id": "a", "turns": [{"index": 0, "role": "user", "text": "x"}]}, "labels": {}}\n'
     '{"conversation": {"conversation_id": "a", "turns": [{"index": 0, "role": "user", "text": "x"}]}, "labels": {}}',
     r"a\.jsonl:2: field 'conversation.conversation_id': a conversation appears twice"),
    ("\n\n", r"a\.jsonl: no anchors"),
])
def test_a_bad_line_is_named(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "a.jsonl").write_text(content)
    with pytest.raises(ConfigError, match=message):
        read_anchors(tmp_path / "a.jsonl", RUBRIC, redactor=Redactor(), ref=lambda cid: cid)


class ChangedJudge:
    """The simulator's judge, until ``changed``: then it answers the other way on every third conversation for one
    item (a new model behind the same name), and stops accepting after ``budget`` calls."""

    name = "simulated"

    def __init__(self, rubric: RubricSet, *, item: str, budget: int = 10**9) -> None:
        self.inner, self.item, self.budget, self.calls, self.changed = SimulatedJudge(rubric), item, budget, 0, False

    async def score(self, conversation: Conversation) -> ScoreRecord:
        self.calls += 1
        if conversation.turns[0].text == "boom":
            raise JudgeError("judge said no", reason="judge_bad_response")
        record = await self.inner.score(conversation)
        if not self.changed or int(conversation.conversation_id[-2:], 16) % 3:
            return record
        items = [i.model_copy(update={"verdict": not i.verdict}) if i.item_id == self.item else i
                 for i in record.items]
        return record.model_copy(update={"items": items})

    def accepting(self) -> bool:
        return self.calls < self.budget

    def on_pace(self) -> bool:
        return True

    async def aclose(self) -> None:
        return None


@pytest.fixture
def anchor_store(tmp_path: Path) -> AnchorStore:
    labels = LabelStore(f"sqlite:///{tmp_path / 'labels.db'}")
    store = AnchorStore(labels, table_prefix=f"t{uuid.uuid4().hex[:8]}_")
    store.load("default", "v1", read_anchors(write_set(tmp_path / "a.jsonl"), RUBRIC, redactor=Redactor(),
                                             ref=lambda cid: uuid.uuid5(uuid.NAMESPACE_URL, cid).hex))
    return store


def make_runner(store: AnchorStore, judge: ChangedJudge, now: list[float], current: dict[str, str],
                registry: CollectorRegistry) -> AnchorRunner:
    async def read() -> dict[str, str]:
        return dict(current)

    return AnchorRunner(store, judge, RUBRIC, Settings().drift, AnchorMetrics(registry), read, clock=lambda: now[0])


async def test_runs_when_due_and_finds_the_changed_item(anchor_store: AnchorStore) -> None:
    registry, now, current = CollectorRegistry(), [1_000.0], dict(PROVENANCE)
    judge = ChangedJudge(RUBRIC, item="dsat.repetition")
    runner = make_runner(anchor_store, judge, now, current, registry)
    first = await runner.tick()
    assert first is not None and (first.reason, first.outcome, first.judged) == ("first", "complete", 90)
    assert await runner.tick() is None  # nothing changed, not a day yet
    for _ in range(14):
        now[0] += 86_400.0
        report = await runner.tick()
        assert report is not None and report.reason == "schedule"
    assert registry.get_sample_value("convmon_judge_drift", {"rubric": "dsat.repetition"}) == 0.0
    judge.changed, current["model"] = True, "simulated-2"  # a silent model bump, seen in the provenance
    report = await runner.tick()
    assert report is not None and report.reason == "provenance"
    assert registry.get_sample_value("convmon_anchor_provenance_changed_timestamp_seconds") == now[0]
    for _ in range(2):  # the new judge, re-judged on schedule
        now[0] += 86_400.0
        await runner.tick()
    drift = runner.evaluate()
    assert sorted(item for item, d in drift.items() if d.drifted) == ["dsat.repetition"]
    assert registry.get_sample_value("convmon_judge_drift", {"rubric": "dsat.repetition"}) == 1.0
    assert registry.get_sample_value("convmon_judge_drift", {"rubric": "sat.gratitude"}) == 0.0
    assert drift["dsat.repetition"].human_agreement_latest < drift["dsat.repetition"].human_agreement_baseline == 1.0
    assert registry.get_sample_value("convmon_anchor_runs_total", {"reason": "schedule", "outcome": "complete"}) == 16
    assert registry.get_sample_value("convmon_anchor_judge_calls_total") == 18 * 90
    # a restarted owner exports when the stored runs were, before it runs one itself
    restarted = CollectorRegistry()
    make_runner(anchor_store, judge, now, current, restarted).evaluate()
    assert restarted.get_sample_value("convmon_anchor_last_run_timestamp_seconds") == now[0]


async def test_the_budget_ends_a_run_incomplete_and_a_failed_anchor_is_skipped(anchor_store: AnchorStore) -> None:
    registry = CollectorRegistry()
    runner = make_runner(anchor_store, ChangedJudge(RUBRIC, item="dsat.repetition", budget=12), [0.0],
                         dict(PROVENANCE), registry)
    report = await runner.run("first", dict(PROVENANCE))
    assert (report.outcome, report.judged, report.calls) == ("incomplete", 12, 12)
    assert registry.get_sample_value("convmon_anchor_runs_total", {"reason": "first", "outcome": "incomplete"}) == 1
    (run,) = anchor_store.runs("default", "v1", 0)
    assert not run.complete and len(anchor_store.verdicts([run.run_id])) == 12 * len(RUBRIC.items)


async def test_no_set_loaded_names_the_command(tmp_path: Path) -> None:
    store = AnchorStore(LabelStore(f"sqlite:///{tmp_path / 'l.db'}"))
    runner = make_runner(store, ChangedJudge(RUBRIC, item="dsat.repetition"), [0.0], dict(PROVENANCE),
                         CollectorRegistry())
    with pytest.raises(ConfigError, match=r"no anchor set named 'default' is loaded: run `convmon anchors load FILE`"):
        await runner.tick()


async def test_provenance_reads_the_model_the_endpoint_reports(tmp_path: Path) -> None:
    def endpoint(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini-2026-01-15",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 1, "total_tokens": 21}})

    settings = Settings(openai_api_key="sk-test-123456", openai_base_url="http://judge.test/v1",
                        label_store_url=f"sqlite:///{tmp_path / 'l.db'}")
    judge = build_judge(settings.judge, settings.rubrics, RUBRIC, Metrics(CollectorRegistry()),
                        ledger_url=settings.label_store_url,
                        http_client=httpx.AsyncClient(transport=httpx.MockTransport(endpoint)))
    assert await reported_model(judge) == "gpt-4o-mini-2026-01-15"
    found = await provenance(judge, RUBRIC, REPO_ROOT / "prompts", "spur")
    assert found["model"] == "gpt-4o-mini-2026-01-15" and found["rubric_version"] == RUBRIC.key
    await judge.aclose()


def test_prompt_hash_follows_every_template_and_the_mode(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "spur_estimation.txt").write_text("Rate ${conversation}")
    before = prompt_hash(RUBRIC, tmp_path, "spur")
    assert prompt_hash(RUBRIC, tmp_path, "likert") != before
    (tmp_path / "templates" / "spur_estimation.txt").write_text("Rate carefully ${conversation}")
    assert prompt_hash(RUBRIC, tmp_path, "spur") != before


def test_cli_loads_a_set_once_and_names_a_bad_line(tmp_path: Path) -> None:
    env = {**os.environ, "CONVMON_LABEL_STORE_URL": f"sqlite:///{tmp_path / 'l.db'}", "PYTHONPATH": str(REPO_ROOT)}

    def convmon(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "monitor.cli", "anchors", *args], capture_output=True,
                              text=True, env=env, timeout=120, cwd=tmp_path)

    path = write_set(tmp_path / "a.jsonl", 30)
    loaded = convmon("load", str(path), "--version", "v1")
    assert loaded.returncode == 0 and "loaded 30 anchors as default version v1" in loaded.stderr
    again = convmon("load", str(path), "--version", "v1")
    assert again.returncode == 1 and again.stderr.count("\n") == 1 and "already loaded" in again.stderr
    (tmp_path / "bad.jsonl").write_text("{}\n")
    bad = convmon("load", str(tmp_path / "bad.jsonl"))
    assert bad.returncode == 1 and "bad.jsonl:1: field 'conversation': Field required" in bad.stderr
    once = convmon("run", "--once")
    assert once.returncode == 0 and json.loads(once.stdout)["run"]["judged"] == 30
    status = json.loads(convmon("status").stdout)
    assert status["version"] == "v1" and status["drifted"] == [] and len(status["runs"]) == 1
    assert status["items"]["dsat.repetition"]["anchors_latest"] == 30
    assert "baseline 1 starts at the next run" in convmon("baseline").stderr


async def test_a_real_judge_endpoint_stops_at_the_daily_budget(tmp_path: Path) -> None:
    """The judge the workers use, over HTTP (the stand-in server), booked in the shared ledger: the run ends
    incomplete where the day's budget ends, and never books past it."""
    from monitor.tools.openai_server import OpenAIServer

    with OpenAIServer() as server:
        settings = Settings(openai_base_url=server.url, openai_api_key="sk-test-123456",
                            label_store_url=f"sqlite:///{tmp_path / 'l.db'}", judge_daily_budget_usd=0.01)
        labels = LabelStore(settings.label_store_url)
        store = AnchorStore(labels)
        store.load("default", "v1", read_anchors(write_set(tmp_path / "a.jsonl", 40), RUBRIC, redactor=Redactor(),
                                                 ref=lambda cid: uuid.uuid5(uuid.NAMESPACE_URL, cid).hex))
        registry = CollectorRegistry()
        judge = build_judge(settings.judge, settings.rubrics, RUBRIC, Metrics(registry),
                            ledger_url=settings.label_store_url)

        async def read() -> dict[str, str]:
            return await provenance(judge, RUBRIC, settings.prompts_dir, settings.judge_mode)

        runner = AnchorRunner(store, judge, RUBRIC, settings.drift, AnchorMetrics(registry), read)
        report = await runner.tick()
        await judge.aclose()
    assert report is not None and report.outcome == "incomplete" and 0 < report.judged < 40
    (run,) = store.runs("default", "v1", 0)
    assert run.provenance["model"] == settings.judge_model and run.provenance["judge"] == judge.name
    spent = registry.get_sample_value("convmon_judge_budget_spent_usd")
    assert spent is not None and 0 < spent <= 0.01
    labels.close()
