"""``convmon calibrate``: train and evaluate the LLM-Rubric calibration network from TSV files.

``--*-judgments`` is the human-judgments TSV (``text_id, Q1.., Q0, annotator_id``) and
``--*-evaluations`` the judge's answer distributions (``text_id, criterion, answer1_prob..``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, cast

import numpy as np
import torch
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from distill.calibration.crossval import DEFAULT_GRID, dialogue_folds, evaluate, grid_search
from distill.calibration.data import CalibrationDataError, CalibrationSet, load_calibration_set
from distill.calibration.network import SCHEDULES, LLMRubricCalibrator
from distill.calibration.summary import render_markdown, write_report
from distill.calibration.transfer import (
    parse_seeds,
    read_judge_map,
    read_reference_hyperparameters,
    render_transfer,
    transfer,
)
from monitor.contracts.errors import ConvmonError
from monitor.contracts.json_output import strict_json

app = typer.Typer(help="Calibrate LLM-judge answers into per-judge satisfaction (LLM-Rubric).",
                  no_args_is_help=True)

Target = Annotated[str, typer.Option(help="Question to predict (overall satisfaction).")]
JudgeColumn = Annotated[str, typer.Option(help="Column naming the label source (annotator, channel, tenant).")]
Threads = Annotated[int, typer.Option(min=1, help="torch CPU threads; the network is tiny, 1 is usually fastest.")]
Grid = Annotated[bool, typer.Option("--grid/--no-grid", help="Pick hyper-parameters by grouped-CV log-lik.")]
Seed = Annotated[int, typer.Option(min=0, help="Seed for torch, fold assignment and the random baseline.")]
Hidden = Annotated[int, typer.Option(min=1, help="Units in this hidden layer of the calibration network.")]
LearningRate = Annotated[float, typer.Option(min=0.0, help="Adam learning rate (> 0).")]
BatchSize = Annotated[int, typer.Option(min=1, help="Rows per training batch.")]
Epochs = Annotated[int, typer.Option(min=0, help="Epochs of this training phase.")]
WeightDecay = Annotated[float, typer.Option(min=0.0, help="L2 weight decay.")]


def _fail(exc: Exception) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(code=2)


def _load(judgments: Path, evaluations: Path, ids: Path | None, target: str, judge_column: str,
          drop_incomplete: bool = False) -> CalibrationSet:
    try:
        return load_calibration_set(judgments, evaluations, ids=ids, target=target, judge_column=judge_column,
                                    drop_incomplete=drop_incomplete)
    except CalibrationDataError as exc:
        raise _fail(exc) from exc


def _print_json(value: Any) -> None:
    """Strict JSON: a metric that does not exist (Pearson of a constant) is null, never a bare NaN."""
    sys.stdout.write(json.dumps(strict_json(value), indent=2, allow_nan=False) + "\n")


def _hyper(hidden1: int, hidden2: int, learning_rate: float, batch_size: int, pretrain_epochs: int,
           finetune_epochs: int, weight_decay: float, seed: int) -> dict[str, Any]:
    return {"hidden1": hidden1, "hidden2": hidden2, "learning_rate": learning_rate, "batch_size": batch_size,
            "pretrain_epochs": pretrain_epochs, "finetune_epochs": finetune_epochs,
            "weight_decay": weight_decay, "random_state": seed}


@app.command()
def train(
    judgments: Annotated[Path | None, typer.Option(help="Human-judgments TSV.")] = None,
    evaluations: Annotated[Path | None, typer.Option(help="Judge-evaluations TSV.")] = None,
    label_store: Annotated[str | None, typer.Option(
        help="Train on this label store (judge verdicts + user thumbs/CSAT) instead of TSV files.")] = None,
    rubric_set: Annotated[str | None, typer.Option(
        help="With --label-store: rubric set name or YAML path (default: CONVMON_RUBRIC_SET).")] = None,
    llm_judge: Annotated[str | None, typer.Option(
        help="With --label-store: the LLM judge to calibrate (default: the one with the most labels).")] = None,
    ids: Annotated[Path | None, typer.Option(help="Optional TSV of text_ids to train on.")] = None,
    out: Annotated[Path | None, typer.Option(help="Write weights.npz + manifest.json here.")] = None,
    registry: Annotated[Path | None, typer.Option(help="Publish to this model registry root.")] = None,
    promote: Annotated[bool, typer.Option(
        help="Make the published version live (with --label-store: only if it passes the gate).")] = False,
    target: Target = "Q0",
    judge_column: JudgeColumn = "annotator_id",
    grid: Grid = False,
    hidden1: Hidden = 25, hidden2: Hidden = 25, learning_rate: LearningRate = 1e-3, batch_size: BatchSize = 64,
    pretrain_epochs: Epochs = 20, finetune_epochs: Epochs = 30, weight_decay: WeightDecay = 0.0,
    seed: Seed = 43, threads: Threads = 1,
) -> None:
    """Fit the calibrator and save it as arrays + a JSON manifest (never a pickle).

    From TSV files: fit on all labels. From the label store: fit on the feedback of the judged
    conversations, gate on held-out ones, publish to --registry; exit 0 when published (and live if
    --promote), 2 when --promote was refused by the gate, 3 when skipped (too little feedback).
    """
    if (judgments is None) != (evaluations is None):
        raise _fail(ValueError("--judgments and --evaluations go together; give both or neither"))
    if (judgments is None) == (label_store is None):
        raise _fail(ValueError("give either --judgments and --evaluations (TSV files) or --label-store URL, "
                               "not both and not neither"))
    params = _hyper(hidden1, hidden2, learning_rate, batch_size, pretrain_epochs, finetune_epochs, weight_decay,
                    seed)
    if label_store is not None:
        if out is not None or ids is not None or grid:
            raise _fail(ValueError("--out, --ids and --grid are for TSV training; with --label-store the model "
                                   "goes to --registry"))
        if registry is None:
            raise _fail(ValueError("--label-store needs --registry ROOT: the gate compares with its live model"))
        torch.set_num_threads(threads)
        _train_from_store(label_store, rubric_set, llm_judge, registry, promote, params)
        return
    assert judgments is not None and evaluations is not None
    if out is None and registry is None:
        raise _fail(ValueError("give --out DIR and/or --registry ROOT to say where the model goes"))
    torch.set_num_threads(threads)
    data = _load(judgments, evaluations, ids, target, judge_column)
    params = {**params, "target_index": data.target_index, "n_options": data.n_options.tolist()}
    cv_ll = None
    if grid:
        params, cv_ll = grid_search(data, DEFAULT_GRID, dialogue_folds(data.groups, random_state=seed),
                                    base=params)[0]
    model = LLMRubricCalibrator(**params).fit(data.X, data.labels, judges=data.judges)
    arrays, meta = model.to_arrays()
    manifest = {**meta, "target": data.target, "questions": list(data.questions),
                "n_options": data.n_options.tolist(), "n_judges": len(model.judges_),
                "n_labels": len(data), "n_dialogues": len(data.dialogue_ids), "data_notes": data.notes,
                "training_files": {"judgments": judgments.name, "evaluations": evaluations.name},
                "cv_log_likelihood": cv_ll}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(out / "weights.npz", **cast(dict[str, Any], arrays))
        (out / "manifest.json").write_text(json.dumps(strict_json(manifest), indent=2, sort_keys=True,
                                                      allow_nan=False), encoding="utf-8")
        typer.echo(f"wrote {out / 'weights.npz'} and {out / 'manifest.json'}")
    if registry is not None:
        from distill.registry import ModelRegistry

        try:
            version = ModelRegistry(registry).publish("calibration", arrays, manifest, promote=promote)
        except ConvmonError as exc:
            raise _fail(exc) from exc
        typer.echo(f"published calibration/{version} to {registry}")


def _train_from_store(url: str, rubric_set: str | None, llm_judge: str | None, registry: Path, promote: bool,
                      params: dict[str, Any]) -> None:
    """The ``--label-store`` path of ``train``; settings (CSAT mapping, tenant key, label source) from env."""
    from distill.calibration.retrain import retrain_calibration
    from distill.registry import ModelRegistry
    from distill.store import LabelStore
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.contracts.settings import load_settings

    try:
        settings = load_settings(label_store_url=url, rubric_set=rubric_set, model_registry=registry)
        rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
        store = LabelStore(settings.label_store_url, retention_days=settings.label_retention_days)
        try:
            result = retrain_calibration(settings.distill.model_copy(update={"calibration_min_labels": 1}), store,
                                         ModelRegistry(registry), rubric, params=params, llm_judge=llm_judge,
                                         promote=promote)
        finally:
            store.close()
    except ConvmonError as exc:
        raise _fail(exc) from exc
    m = result.metrics
    typer.echo(f"calibration {rubric.key}: {result.status}"
               + (f" calibration/{result.version} in {registry}" if result.version else ""))
    if m:
        typer.echo(f"held-out log-likelihood {m['log_likelihood']:.4f} (constant baseline "
                   f"{m['baseline_log_likelihood']:.4f}), smoothed ECE {m['smooth_ece']:.4f} (baseline "
                   f"{m['baseline_smooth_ece']:.4f}) on {m['heldout_labels']} held-out labels")
    for reason in result.reasons:
        typer.echo(f"- {reason}")
    if result.status == "skipped":
        raise typer.Exit(code=3)
    if promote and result.status != "promoted":
        raise typer.Exit(code=2)


@app.command("evaluate")
def evaluate_cmd(
    train_judgments: Annotated[Path, typer.Option(help="Human-judgments TSV to train on.")],
    train_evaluations: Annotated[Path, typer.Option(help="Judge-evaluations TSV to train on.")],
    train_ids: Annotated[Path | None, typer.Option(help="Optional TSV of text_ids to keep.")] = None,
    test_judgments: Annotated[Path | None, typer.Option(help="Human-judgments TSV to test on.")] = None,
    test_evaluations: Annotated[Path | None, typer.Option(help="Judge-evaluations TSV to test on.")] = None,
    test_ids: Annotated[Path | None, typer.Option(help="Optional TSV of text_ids to keep.")] = None,
    target: Target = "Q0",
    judge_column: JudgeColumn = "annotator_id",
    folds: Annotated[int, typer.Option(min=2, help="CV folds when no test set is given.")] = 5,
    grid: Grid = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    report: Annotated[Path | None, typer.Option(help="Write calibration.md + reliability.png here.")] = None,
    hidden1: Hidden = 25, hidden2: Hidden = 25, learning_rate: LearningRate = 1e-3, batch_size: BatchSize = 64,
    pretrain_epochs: Epochs = 20, finetune_epochs: Epochs = 30, weight_decay: WeightDecay = 0.0,
    seed: Seed = 43, threads: Threads = 1,
    schedule: Annotated[str, typer.Option(
        help="Training schedule: convmon (zero-initialised judge offsets, epochs over the rows) or reference "
             "(the LLM-Rubric code's: random offsets, epochs x int(epoch-size / batch-size) steps with "
             "replacement).")] = "convmon",
    epoch_size: Annotated[int | None, typer.Option(
        min=1, help="Reference schedule: rows per epoch for the step count (the reference's all_data_size) "
             "(default: training rows).")] = None,
    hyperparameters: Annotated[Path | None, typer.Option(
        help="LLM-Rubric hyper-parameter JSON (best_synth_cross-validation_hp.json); its values replace "
             "--hidden1/--hidden2/--learning-rate/--batch-size/--*-epochs/--epoch-size.")] = None,
    judge_map: Annotated[Path | None, typer.Option(
        help="JSON annotator id -> judge index (the reference's judge_map.json): the offset row each "
             "annotator trains and is tested with.")] = None,
    drop_incomplete: Annotated[bool, typer.Option(
        help="Leave out label rows with an empty cell (the reference scripts' dropna) instead of masking it.")
    ] = False,
    seeds: Annotated[str | None, typer.Option(
        help="Transfer protocol: one network per seed (e.g. 43-52), trained on the train set and scored on the "
             "test set; reports every seed, the spread, the seed ensemble and the baselines.")] = None,
) -> None:
    """Score LLM-Rubric and the baselines: grouped CV, or train on one set and test on another."""
    if (test_judgments is None) != (test_evaluations is None):
        raise _fail(ValueError("--test-judgments and --test-evaluations go together; give both or neither"))
    if folds < 2:
        raise _fail(ValueError(f"--folds must be at least 2, got {folds}"))
    if schedule not in SCHEDULES:
        raise _fail(ValueError(f"--schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}"))
    if epoch_size is not None and (epoch_size < 1 or schedule != "reference"):
        raise _fail(ValueError(f"--epoch-size takes an integer >= 1 and only with --schedule reference "
                               f"(got {epoch_size} with {schedule})"))
    try:
        seed_list = parse_seeds(seeds) if seeds is not None else None
    except ValueError as exc:
        raise _fail(exc) from exc
    if seed_list is not None and (test_judgments is None or grid or report is not None):
        raise _fail(ValueError("--seeds is the transfer protocol: it needs --test-judgments/--test-evaluations "
                               "and takes no --grid or --report"))
    torch.set_num_threads(threads)
    train_set = _load(train_judgments, train_evaluations, train_ids, target, judge_column, drop_incomplete)
    test_set = None
    if test_judgments is not None and test_evaluations is not None:
        test_set = _load(test_judgments, test_evaluations, test_ids, target, judge_column, drop_incomplete)
    params = _hyper(hidden1, hidden2, learning_rate, batch_size, pretrain_epochs, finetune_epochs,
                    weight_decay, seed) | {"schedule": schedule, "epoch_size": epoch_size}
    try:
        if hyperparameters is not None:
            params |= read_reference_hyperparameters(hyperparameters, train_set)
        if judge_map is not None:
            params["judge_index"] = read_judge_map(judge_map)
    except CalibrationDataError as exc:
        raise _fail(exc) from exc
    if seed_list is not None and test_set is not None:
        try:
            result = transfer(train_set, test_set, params=params, seeds=seed_list)
        except ValueError as exc:
            raise _fail(exc) from exc
        summary = result.summary() | {"data_notes": {"train": train_set.notes, "test": test_set.notes}}
        if as_json:
            _print_json(summary)
        else:
            typer.echo(render_transfer(summary))
        return
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("evaluating", total=None)

            def progress(step: str, done: int, total: int) -> None:
                bar.update(task, description=f"evaluating: {step}", completed=done, total=total)

            ev = evaluate(train_set, test_set, params=params, grid=DEFAULT_GRID if grid else None,
                          n_splits=folds, random_state=seed, progress=progress)
    except ValueError as exc:
        raise _fail(exc) from exc
    if report is not None:
        md, png = write_report(ev, report)
        typer.echo(f"wrote {md} and {png}", err=as_json)
    if as_json:
        _print_json(ev.summary())
    else:
        typer.echo(render_markdown(ev))
