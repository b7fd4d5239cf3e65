"""`convmon inspect` prints the score sink's rows, with the label store's user text redacted."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from distill.score_store import ScoreStore
from distill.store import LabelStore
from monitor.contracts.events import Conversation, Turn
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import Settings

RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)


def test_inspect_prints_latest_rows_redacted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    dsat = next(i for i in RUBRIC.items if i.polarity == "dsat")
    items = [ItemResult(item_id=i.id, polarity=i.polarity, verdict=i.id == dsat.id, score=8.0 if i.id == dsat.id
                        else 0.0) for i in RUBRIC.items]
    score = ScoreRecord(conversation_id="conv-9", scorer="llm", judge="simulated", rubric_set=RUBRIC.id,
                        rubric_version=RUBRIC.version, model_version="m", items=items, R=-8.0, scored_at=time.time(),
                        span="ab" * 16 + "-" + "cd" * 8)
    conversation = Conversation(conversation_id="conv-9", turns=[
        Turn(index=0, role="user", text="mail me at bob@example.com, it failed again"),
        Turn(index=1, role="assistant", text="sorry")])
    labels = LabelStore(url)
    labels.upsert([(conversation, score)])  # stored unredacted here (no redactor): inspect redacts again
    ScoreStore(labels, RUBRIC).upsert([score])
    labels.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env.update(CONVMON_LABEL_STORE_URL=url, COLUMNS="250")
    out = subprocess.run([sys.executable, "-m", "monitor.cli", "inspect", "--item", dsat.id, "--window", "1h"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "conv-9" in out.stdout and "ab" * 16 in out.stdout and "[EMAIL]" in out.stdout
    assert "bob@example.com" not in out.stdout
    bad = subprocess.run([sys.executable, "-m", "monitor.cli", "inspect", "--item", "nope"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not an item of rubric set" in bad.stderr
