"""`convmon inspect`: the latest conversations a rubric item said "yes" for, as Grafana's drill-down table shows.

Rows come from ``<prefix>score_items`` (written by the score sink, ``CONVMON_SCORE_STORE``); a
conversation the judge labelled also shows its last user turn from the label store, redacted again
here (the store redacts on write; extra patterns may have been added since).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table

from monitor.contracts.errors import ConfigError
from monitor.contracts.sections import DistillSettings, JudgeSettings, RubricSettings

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_TEXT = 120


def parse_window(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text.strip())
    if not match:
        raise ConfigError(f"--window {text!r}: expected a number and a unit s, m, h or d (e.g. 30m, 6h)")
    return float(match.group(1)) * UNITS[match.group(2)]


def inspect_rows(rubrics: RubricSettings, judge: JudgeSettings, distill: DistillSettings, item: str, *,
                 window_s: float, limit: int, scorer: str | None) -> list[dict[str, object]]:
    """The score sink's latest yes rows for ``item``, each with its conversation's last user turn, redacted."""
    from distill.score_store import ScoreStore
    from distill.store import LabelStore
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.judge.redact import Redactor

    rubric = load_rubric_set(rubrics.rubric_set, rubrics.prompts_dir)
    if item not in rubric.item_ids:
        raise ConfigError(f"--item {item!r} is not an item of rubric set {rubric.key}; items: "
                          + ", ".join(rubric.item_ids))
    redact = Redactor(judge.pii_extra_patterns).redact
    store = LabelStore.from_settings(distill)
    try:
        rows = ScoreStore(store, rubric).latest(item, since=time.time() - window_s, limit=limit, scorer=scorer)
        for row in rows:
            labels = store.fetch(conversation_id=str(row["conversation_id"]), limit=1)
            users = [t.text for label in labels[:1] for t in label.turns if t.role == "user"]
            row["last_user_turn"] = redact(users[-1])[:MAX_TEXT] if users else ""
    finally:
        store.close()
    return rows


def print_rows(rows: list[dict[str, object]], item: str, console: Console) -> None:
    table = Table(title=f"latest conversations with {item} = yes", show_lines=False)
    for name in ("scored at (UTC)", "conversation", "reference", "scorer", "value", "R", "model", "trace id",
                 "last user turn"):
        table.add_column(name, overflow="fold")
    for r in rows:
        at = datetime.fromtimestamp(float(r["scored_at"]), UTC).strftime("%Y-%m-%d %H:%M:%S")  # type: ignore[arg-type]
        value = r["value"]
        table.add_row(at, str(r["conversation_id"]), str(r.get("conversation_ref") or ""), str(r["scorer"]),
                      f"{value:.3g}" if isinstance(value, float) else "", f"{float(r['r']):.2f}",  # type: ignore[arg-type]
                      str(r["model_version"]), str(r["trace_id"] or ""), str(r["last_user_turn"]))
    console.print(table)
    if not rows:
        console.print("no rows: is the window long enough, and the score sink on (CONVMON_SCORE_STORE, on by "
                      "default)? `convmon ui` shows the same rows as a page")
