"""``convmon labels import``: reviewers' answers from a CSV or JSONL file into the label store as human labels.

One record per (conversation, item): ``conversation_id``, ``item_id`` (a rubric item, or ``overall``),
``answer`` (``yes``/``no``; ``sat``/``dsat`` for ``overall``), optionally ``judge_verdict``,
``inclusion_probability`` (only labels that carry it feed the agreement estimates) and ``labelled_at``. A bad
record stops the import before anything is written, with one line naming the file, line and field.
``convmon labels consume --topic T`` reads the same records from a Kafka topic of feedback.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from monitor.contracts.errors import ConfigError

app = typer.Typer(help="Human labels: import reviewers' answers from CSV or JSONL.", no_args_is_help=True)


@app.callback()
def labels() -> None:
    """Human labels (a callback keeps `import` a subcommand while it is the only one)."""


def read_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) pairs of a ``.csv`` (header line first) or ``.jsonl`` file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    if path.suffix == ".csv":
        return [(n + 2, {k: v for k, v in row.items() if v not in ("", None)})
                for n, row in enumerate(csv.DictReader(text.splitlines()))]
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{n}: not JSON: {exc.msg}") from exc
        if not isinstance(value, dict):
            raise ConfigError(f"{path}:{n}: expected a JSON object")
        out.append((n, value))
    return out


@app.command("import")
def import_labels(
    path: Annotated[Path, typer.Argument(help="A .csv (with a header line) or .jsonl file of human labels.")],
) -> None:
    """Import human labels (kept apart from the judge's labels and out of the rate counters)."""
    from distill.human_labels import HumanLabelStore, label_from
    from distill.store import LabelStore
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.contracts.settings import load_settings

    if path.suffix not in (".csv", ".jsonl"):
        raise ConfigError(f"{path}: expected a .csv or .jsonl file")
    settings = load_settings()
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    labels = []
    for line, record in read_records(path):
        if record.get("judge_verdict") in ("true", "false"):  # CSV cells are strings
            record["judge_verdict"] = record["judge_verdict"] == "true"
        try:
            labels.append(label_from(record, rubric, source="import"))
        except ValueError as exc:
            raise ConfigError(f"{path}:{line}: {exc}") from exc
    store = LabelStore.from_settings(settings.distill)
    try:
        written = HumanLabelStore(store).upsert(labels)
    finally:
        store.close()
    typer.echo(json.dumps({"file": str(path), "imported": written}))


@app.command("consume")
def consume_topic(
    topic: Annotated[str, typer.Option(help="The Kafka topic of feedback: one JSON label a message.")],
    until_end: Annotated[bool, typer.Option("--until-end", help="Stop once caught up (cron, tests).")] = False,
) -> None:
    """Store human labels from a Kafka topic (consumer group <app_id>-human-labels); bad messages are
    dead-lettered with their reason."""
    import asyncio

    from distill.human_labels import HumanLabelStore
    from distill.store import LabelStore
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.contracts.settings import load_settings
    from monitor.tools.review.feedback_topic import consume

    settings = load_settings()
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    store = LabelStore.from_settings(settings.distill)
    try:
        done = asyncio.run(consume(settings.kafka, topic, HumanLabelStore(store), rubric,
                                   max_request_bytes=settings.max_request_bytes, until_end=until_end))
    finally:
        store.close()
    typer.echo(json.dumps({"topic": topic, "stored": done.stored, "dead_lettered": done.rejected}))
