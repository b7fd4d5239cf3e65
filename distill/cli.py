"""``convmon distill``: train the per-rubric classifiers from the label store or a JSONL export.

``train`` trains every item (rich progress bar), evaluates against the teacher on a held-out
split, writes a markdown + PNG report, publishes the candidate and promotes it only if the
promotion gate passes. ``train --schedule`` is the same single run for an external scheduler
(Kubernetes CronJob): plain log lines, and an exit code a scheduler can act on:

    0  promoted (the candidate is live)        2  gate rejected (published, not live)
    1  error (store, registry, bad input)      3  skipped (too few labels or positives)
"""

from __future__ import annotations

import logging
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from distill.registry import ModelRegistry
from distill.retrain import retrain_once, train_evaluate_publish
from distill.retrain_result import RetrainResult
from distill.store import LabelStore
from distill.train import dataset_from_records, read_jsonl
from monitor.contracts.errors import ConvmonError
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.judge.logsafe import install_log_safety

app = typer.Typer(help="Distilled per-rubric classifiers: train, evaluate, publish.", no_args_is_help=True)
EXIT = {"promoted": 0, "rejected": 2, "skipped": 3}
log = logging.getLogger("convmon.distill")


def _settings(ctx: typer.Context, overrides: dict[str, object]) -> Settings:
    """The CLI's Settings (ctx.obj when mounted under ``convmon``), with this command's overrides."""
    base = ctx.obj if isinstance(ctx.obj, Settings) else Settings()
    update = {k: v for k, v in overrides.items() if v is not None}
    return base.model_copy(update=update) if update else base


def _summary(console: Console, result: RetrainResult) -> None:
    table = Table("item", "status", "held-out ROC-AUC", "Brier", title=f"distill: {result.status}")
    ev = result.evaluation
    for item_id, status in result.item_status.items():
        m = ev.items.get(item_id) if ev else None
        auc = f"{m.roc_auc:.3f}" if m and m.roc_auc is not None else "—"
        table.add_row(item_id, status, auc, f"{m.brier:.4f}" if m else "—")
    console.print(table)
    for reason in result.reasons:
        console.print(f"• {reason}")
    if result.version:
        console.print(f"version {result.version} ({'live' if result.status == 'promoted' else 'not live'})")
    if result.report:
        console.print(f"report: {result.report}")


@app.command()
def train(
    ctx: typer.Context,
    jsonl: Path | None = typer.Option(None, help="Train from LabelRecord JSON lines instead of the label store."),
    store_url: str | None = typer.Option(None, help="Label store URL (default: CONVMON_LABEL_STORE_URL)."),
    rubric: str | None = typer.Option(None, help="Rubric set name or YAML path (default: CONVMON_RUBRIC_SET)."),
    featurizer: str | None = typer.Option(
        None, help="hashing, minilm, openai or a '+' union (default: CONVMON_FEATURIZER)."),
    registry: Path | None = typer.Option(None, help="Model registry directory (default: CONVMON_MODEL_REGISTRY)."),
    report_dir: Path | None = typer.Option(None, help="Where reports go (default: CONVMON_DISTILL_REPORT_DIR)."),
    schedule: bool = typer.Option(False, "--schedule", help="One unattended run; exit code 0/1/2/3 (see help)."),
) -> None:
    """Train every rubric item, evaluate, report, publish; promote if the gate passes."""
    console = Console(stderr=schedule)
    if schedule:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        install_log_safety()  # the openai featurizer's base URL may carry credentials
    try:
        settings = _settings(ctx, {"label_store_url": store_url, "rubric_set": rubric, "featurizer": featurizer,
                                   "model_registry": registry, "distill_report_dir": report_dir})
        rubric_set = load_rubric_set(settings.rubric_set, settings.prompts_dir)
        models = ModelRegistry(settings.model_registry)
        openai_client = None
        if "openai" in settings.featurizer.split("+"):
            import openai

            key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
            openai_client = openai.OpenAI(api_key=key, base_url=settings.openai_base_url)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, disable=schedule) as bar:
            task = bar.add_task("training items", total=len(rubric_set.items))

            def progress(item_id: str, status: str) -> None:
                bar.update(task, advance=1, description=f"{item_id}: {status}")
                if schedule:
                    log.info("%s: %s", item_id, status)

            common = {"registry": models, "rubric": rubric_set, "openai_client": openai_client,
                      "progress": progress, "report_dir": settings.distill_report_dir}
            if jsonl is not None:
                data = dataset_from_records(read_jsonl(jsonl), rubric_set)
                result = train_evaluate_publish(data, settings=settings.distill, **common)  # type: ignore[arg-type]
            else:
                store = LabelStore(settings.label_store_url, retention_days=settings.label_retention_days)
                try:
                    result = retrain_once(settings.distill, store, **common)  # type: ignore[arg-type]
                finally:
                    store.close()
    except ConvmonError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    if schedule:
        log.info("distill %s: %s version=%s; %s", rubric_set.key, result.status, result.version,
                 "; ".join(result.reasons))
    else:
        _summary(console, result)
    raise typer.Exit(EXIT[result.status])


@app.callback()
def main() -> None:
    """Distilled per-rubric classifiers (SPUR distillation)."""
