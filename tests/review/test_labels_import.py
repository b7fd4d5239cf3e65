"""`convmon labels import`: CSV and JSONL into the human labels table; a bad record is one line naming file, line and
field, and nothing is written; `convmon forget` erases the imported labels with the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from distill.human_labels import HumanLabelStore
from distill.store import LabelStore
from monitor.contracts.settings import REPO_ROOT, load_settings
from monitor.runtime.retention import forget
from tests.review.stored import ITEM


def cli(args: list[str], url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env.update(CONVMON_LABEL_STORE_URL=url, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", "monitor.cli", "labels", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def stored(url: str) -> dict[tuple[str, str], str]:
    store = LabelStore(url)
    try:
        return {(h.conversation_id, h.item_id): h.answer for h in HumanLabelStore(store).fetch()}
    finally:
        store.close()


def test_csv_and_jsonl_import_and_forget(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    (tmp_path / "a.csv").write_text(f"conversation_id,item_id,answer,judge_verdict\nc-1,{ITEM},yes,false\n"
                                    "c-1,overall,dsat,\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({"conversation_id": "c-2", "item_id": ITEM, "answer": "no",
                                                  "inclusion_probability": 0.25}) + "\n\n")
    for name, count in (("a.csv", 2), ("b.jsonl", 1)):
        out = cli(["import", str(tmp_path / name)], url)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == {"file": str(tmp_path / name), "imported": count}
    assert stored(url) == {("c-1", ITEM): "yes", ("c-1", "overall"): "dsat", ("c-2", ITEM): "no"}
    settings = load_settings(label_store_url=url)
    forget(settings.kafka, settings.distill, settings.rubrics, ["c-1"])
    assert stored(url) == {("c-2", ITEM): "no"}


def test_a_bad_record_names_file_line_and_field_and_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    bad = tmp_path / "bad.csv"
    bad.write_text(f"conversation_id,item_id,answer\nc-1,{ITEM},yes\nc-2,{ITEM},maybe\n")
    out = cli(["import", str(bad)], url)
    assert out.returncode == 2 and f"{bad}:3: field 'answer'" in out.stderr and len(out.stderr.splitlines()) == 1
    assert stored(url) == {}
    (tmp_path / "item.jsonl").write_text('{"conversation_id": "c", "item_id": "dsat.nope", "answer": "yes"}\n')
    assert "item.jsonl:1: field 'item_id'" in cli(["import", str(tmp_path / "item.jsonl")], url).stderr
    (tmp_path / "overall.jsonl").write_text('{"conversation_id": "c", "item_id": "overall", "answer": "yes"}\n')
    assert "overall.jsonl:1: field 'answer'" in cli(["import", str(tmp_path / "overall.jsonl")], url).stderr
    (tmp_path / "x.jsonl").write_text("{not json\n")
    assert "x.jsonl:1: not JSON" in cli(["import", str(tmp_path / "x.jsonl")], url).stderr
    assert "expected a .csv or .jsonl file" in cli(["import", str(tmp_path / "x.txt")], url).stderr
