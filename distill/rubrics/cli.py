"""``convmon rubrics learn | evaluate | apply``: learn rubric sets, compare them, hand one to the monitor."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from prometheus_client import CollectorRegistry
from rich.markup import escape

from distill.rubrics.cache import CachingClient, ResponseCache
from distill.rubrics.console import (
    TOO_LITTLE,
    console,
    errors,
    exit_if_too_little,
    plan_table,
    progress,
    report_table,
    stdout,
)
from distill.rubrics.dedup import make_embedder
from distill.rubrics.extract import file_sha256, load_labeled
from distill.rubrics.learn import LearnOptions, learn_rubric_set, plan_calls, too_little
from distill.rubrics.measure import bootstrap_indices, evaluate_set, score_matrix
from monitor.contracts.errors import RubricError
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet, dump_rubric_set, load_rubric_set
from monitor.contracts.sections import JudgeSettings
from monitor.contracts.settings import Settings
from monitor.judge.client import JudgeClient

app = typer.Typer(help="Learn rubric sets from labelled conversations (SPUR, RUBICON), evaluate and apply them.",
                  no_args_is_help=True)
Labeled = Annotated[Path, typer.Option("--labeled", help="JSONL with a label per conversation, or a USS .txt file.")]
Model = Annotated[str | None, typer.Option(help="Chat model (default: judge_model).")]
Limit = Annotated[int | None, typer.Option(min=1, help="Use only the first N conversations of the file.")]
Seed = Annotated[int, typer.Option(min=0, help="Seed for batching, folds and bootstrap.")]
MaxDropped = Annotated[float, typer.Option(
    min=0.0, max=1.0, help="Exit 3 when a stage drops more than this share of its answers (cut off, unparseable).")]


def _settings() -> Settings:
    from monitor.contracts.settings import load_settings

    return load_settings()


def _llm(judge: JudgeSettings, data_dir: Path) -> CachingClient:
    """The judge endpoint behind a response cache under ``data_dir`` (a rerun resumes from it)."""
    client = JudgeClient(judge, Metrics(CollectorRegistry())) if judge.judge_configured else None
    return CachingClient(client, ResponseCache(data_dir / "rubric_cache"),
                         temperature=judge.judge_temperature, default_model=judge.judge_model)


@app.command()
def learn(
    labeled: Labeled,
    out: Annotated[Path | None, typer.Option(help="Output YAML (default: <data_dir>/rubrics/<id>.yaml).")] = None,
    set_id: Annotated[str | None, typer.Option("--id", help="Rubric-set id (default: learned-<file stem>).")] = None,
    method: Annotated[str, typer.Option(help="spur (fixed n) or rubicon (pool + selection).")] = "spur",
    model: Model = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Reasons per summarization call.")] = 100,
    n: Annotated[int, typer.Option(min=1, help="Items per polarity per summarization.")] = 10,
    max_reasons: Annotated[int, typer.Option(min=1, help="Reasons per extracted conversation.")] = 3,
    dedup_threshold: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Cosine at which items are duplicates.")] = 0.85,
    embedder: Annotated[str, typer.Option(help="De-duplication embedder: hashing, minilm or openai.")] = "hashing",
    score_mode: Annotated[str, typer.Option(help="RUBICON pool scoring: likert or spur.")] = "likert",
    max_pool: Annotated[int, typer.Option(min=1, help="RUBICON pool size per polarity.")] = 40,
    sat_budget: Annotated[int, typer.Option(min=0, help="RUBICON: at most this many SAT items.")] = 10,
    dsat_budget: Annotated[int, typer.Option(min=0, help="RUBICON: at most this many DSAT items.")] = 10,
    limit: Limit = None,
    seed: Seed = 0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the calls and estimated cost, then stop.")] = False,
    max_dropped: MaxDropped = 0.1,
) -> None:
    """Learn a rubric set from labelled conversations (every LLM call cached: a rerun resumes).

    Exit 0 written, 2 error (nothing usable), 3 a stage dropped more than --max-dropped of its answers.
    """
    with errors():
        if method not in ("spur", "rubicon") or score_mode not in ("likert", "spur"):
            raise RubricError(f"--method must be spur or rubicon and --score-mode likert or spur; got {method!r}, "
                              f"{score_mode!r}")
        settings = _settings()
        data, counts = load_labeled(labeled, limit=limit)
        opts = LearnOptions(method=method, model=model or settings.judge_model, max_reasons=max_reasons,  # type: ignore[arg-type]
                            batch_size=batch_size, n=n, dedup_threshold=dedup_threshold, embedder=embedder,
                            score_mode=score_mode, max_pool=max_pool, sat_budget=sat_budget,  # type: ignore[arg-type]
                            dsat_budget=dsat_budget, seed=seed)
        llm = _llm(settings.judge, settings.data_dir)
        if dry_run:
            typer.echo(f"{len(data)} labelled conversations ({counts['SAT']} SAT, {counts['DSAT']} DSAT, "
                       f"{counts['NEUTRAL']} neutral dropped)")
            stdout().print(plan_table(plan_calls(settings.judge, settings.rubrics, llm, data, opts), opts.model))
            return
        set_id = set_id or "learned-" + (re.sub(r"[^a-z0-9]+", "-", labeled.stem.lower()).strip("-") or "set")
        info = {"file": labeled.name, "sha256": file_sha256(labeled), "limit": limit, "counts": counts}
        openai_client = None
        if embedder == "openai" and settings.judge_configured:
            import openai

            key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else "unused"
            openai_client = openai.OpenAI(base_url=settings.openai_base_url, api_key=key)
        embed = make_embedder(embedder, openai_client=openai_client)

        async def run() -> Any:
            try:
                with progress() as track:
                    return await learn_rubric_set(llm, settings.judge, settings.rubrics, data, opts, embedder=embed,
                                                  set_id=set_id, data_info=info, track=track)
            finally:
                if llm.client is not None:
                    await llm.client.aclose()

        result = asyncio.run(run())
        stats = result.stats["llm"]
        spent = f"{stats['calls']} LLM calls, {stats['cache_hits']} from cache, ${stats['cost_usd']:.4f}"
        for drops in result.drops:
            if drops.dropped:
                console.print(f"dropped: {escape(str(drops))}")
        if short := too_little(result.drops, max_dropped):
            console.print(f"[red]error:[/red] the learned set rests on too little: {'; '.join(map(str, short))}; "
                          f"more than --max-dropped {max_dropped:g}, so nothing was written ({spent}). Rerun with a "
                          "larger --max-dropped to accept it: finished calls come from the cache")
            raise typer.Exit(code=TOO_LITTLE)
        target = out or settings.data_dir / "rubrics" / f"{result.rubric.id}.yaml"
        dump_rubric_set(result.rubric, target)
        typer.echo(f"wrote {result.rubric.key} ({len(result.rubric.items)} items) to {target}; {spent}")


def _check_scorable(rubric: RubricSet) -> None:
    """R = SAT scores - DSAT scores: without either it is 0 for every conversation and the metrics mean nothing."""
    polarities = Counter(item.polarity for item in rubric.items)
    if not polarities["sat"] and not polarities["dsat"]:
        kinds = ", ".join(f"{n} {p}" for p, n in sorted(polarities.items()))
        raise RubricError(f"{rubric.key} has no SAT or DSAT items ({kinds}): evaluate measures how R = SAT - DSAT "
                          "separates SAT from DSAT conversations, and R is 0 for every conversation with this set")
    if not polarities["sat"] or not polarities["dsat"]:
        missing = "SAT" if not polarities["sat"] else "DSAT"
        console.print(f"[yellow]warning:[/yellow] {rubric.key} has no {missing} items: its R only counts the other "
                      "polarity")


@app.command()
def evaluate(
    labeled: Labeled,
    sets: Annotated[list[str], typer.Option("--set", help="Rubric set name or YAML path; repeat to compare.")],
    mode: Annotated[str, typer.Option(help="Judge mode for scoring: spur, likert or logprobs (an item scores "
                                             "10 x P(yes) from the first token's top logprobs).")] = "spur",
    model: Model = None,
    positive: Annotated[str, typer.Option(help="Positive class for precision/recall/F1: sat or dsat.")] = "sat",
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap resamples for 95% CIs (0: none).")] = 1000,
    limit: Limit = None,
    seed: Seed = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    max_dropped: MaxDropped = 0.1,
) -> None:
    """Score labelled conversations with each rubric set and compare them side by side.

    Exit 0, 2 error, 3 a set's answers failed for more than --max-dropped of the conversations (the
    report is printed, undefined metrics as null / n/a).
    """
    import numpy as np

    with errors():
        if mode not in ("spur", "likert", "logprobs") or positive not in ("sat", "dsat"):
            raise RubricError(f"--mode must be spur, likert or logprobs and --positive sat or dsat; got {mode!r}, "
                              f"{positive!r}")
        settings = _settings()
        data, _ = load_labeled(labeled, limit=limit)
        rubrics = [load_rubric_set(s, settings.prompts_dir) for s in sets]
        for rubric in rubrics:
            _check_scorable(rubric)
        llm = _llm(settings.judge, settings.data_dir)
        y = np.array([1 if x.label == "SAT" else 0 for x in data])
        failures: list[Counter[str]] = [Counter() for _ in rubrics]

        async def run() -> list[Any]:
            try:
                with progress() as track:
                    return [await score_matrix(llm, settings.judge, settings.rubrics, list(r.items),
                                               [x.conversation for x in data],
                                               mode=mode,  # type: ignore[arg-type]
                                               model=model or settings.judge_model, on_done=track(r.key, len(data)),
                                               failures=why)
                            for r, why in zip(rubrics, failures, strict=True)]
            finally:
                if llm.client is not None:
                    await llm.client.aclose()

        matrices = asyncio.run(run())
        resamples = bootstrap_indices(len(data), bootstrap, seed) if bootstrap else None
        reports = [evaluate_set(name, r, m, y, positive=positive, resamples=resamples)
                   for name, r, m in zip(sets, rubrics, matrices, strict=True)]
        for report, why in zip(reports, failures, strict=True):
            report.failures = dict(why)
    if as_json:
        typer.echo(json.dumps({"labeled": labeled.name, "positive": positive, "mode": mode,
                               "llm": llm.stats.as_dict(), "sets": [r.as_dict() for r in reports]}, indent=2,
                              allow_nan=False))
    else:
        stdout().print(report_table(labeled.name, len(data), positive, reports))
    exit_if_too_little(reports, max_dropped)


def _live_keys(registry: Path) -> dict[str, str]:
    """``kind -> rubric_key`` of every live model in the registry (manifests only, no weights)."""
    keys = {}
    for live in sorted(registry.glob("*/LIVE")) if registry.is_dir() else []:
        manifest = live.parent / live.read_text(encoding="utf-8").strip() / "manifest.json"
        with contextlib.suppress(OSError, ValueError):
            keys[live.parent.name] = json.loads(manifest.read_text(encoding="utf-8")).get("rubric_key", "")
    return keys


@app.command()
def apply(
    path: Annotated[Path, typer.Argument(help="A learned rubric-set YAML.")],
    rubrics_dir: Annotated[Path | None, typer.Option(help="Target directory (default: <prompts_dir>/rubrics).")] = None,
) -> None:
    """Validate a learned set, install it where the monitor loads rubric sets, and print the setting."""
    with errors():
        settings = _settings()
        rubric = load_rubric_set(path, settings.prompts_dir)
        default_dir = settings.prompts_dir / "rubrics"
        target = (rubrics_dir or default_dir) / f"{rubric.id}.yaml"
        if target.is_file():
            current = load_rubric_set(target, settings.prompts_dir)
            if current.key == rubric.key and current != rubric:
                raise RubricError(f"{target} already holds {rubric.key} with different content: a version is "
                                  "immutable, learn again (or change the version) instead")
            if current.key != rubric.key:
                console.print(f"replacing {current.key} with {rubric.key} in {target}")
        dump_rubric_set(rubric, target)
        for kind, key in _live_keys(settings.model_registry).items():
            if key and key != rubric.key:
                console.print(f"note: live {kind!r} models were trained for {key}; workers running {rubric.key} "
                              "refuse them until models are retrained for the new set")
        name = rubric.id if target.parent.resolve() == default_dir.resolve() else str(target.resolve())
        typer.echo(f"installed {rubric.key} ({len(rubric.items)} items) at {target}")
        typer.echo(f"CONVMON_RUBRIC_SET={name}")
