"""``convmon anchors``: load a human-labelled anchor set, re-judge it on a schedule, and report judge drift.

    convmon anchors simulate --count 200 > anchors.jsonl   # the demo's set, from the simulator's truth
    convmon anchors load anchors.jsonl                     # a new version of CONVMON_ANCHORS_SET
    convmon anchors load --from-human-labels               # ... built from the review page's / imported labels
    convmon anchors run                                    # the one re-judging owner (long-running; --once)
    convmon anchors status                                 # drift per item, runs, cost (JSON)
    convmon anchors baseline                               # accept the current judge: a new baseline
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from prometheus_client import CollectorRegistry, start_http_server
from rich.console import Console

from distill.anchor_store import AnchorStore
from distill.reference_key import conversation_ref
from distill.store import LabelStore
from monitor.contracts.errors import ConfigError, ConvmonError
from monitor.contracts.json_output import dumps
from monitor.contracts.metrics import Metrics
from monitor.contracts.metrics_anchors import AnchorMetrics
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.settings import Settings, load_settings
from monitor.judge.build import build_judge
from monitor.judge.logsafe import install_log_safety
from monitor.judge.redact import Redactor
from monitor.tools.anchors.from_labels import DEFAULT_MAX, MIN_ANCHORS, content_version, human_anchors
from monitor.tools.anchors.load import file_version, read_anchors, simulated_anchors
from monitor.tools.anchors.provenance import provenance
from monitor.tools.anchors.runner import AnchorRunner

app = typer.Typer(help="Judge drift on a human-labelled anchor set.", no_args_is_help=True)
console = Console(stderr=True)


def _fail(exc: ConvmonError) -> typer.Exit:
    console.print(f"error: {exc}", highlight=False, markup=False, soft_wrap=True)
    return typer.Exit(1)


def _open(settings: Settings) -> tuple[LabelStore, AnchorStore, RubricSet]:
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    labels = LabelStore.from_settings(settings.distill)
    return labels, AnchorStore(labels), rubric


def _runner(settings: Settings, registry: CollectorRegistry) -> tuple[AnchorRunner, LabelStore]:
    labels, store, rubric = _open(settings)
    judge = build_judge(settings.judge, settings.rubrics, rubric, Metrics(registry),
                        ledger_url=settings.label_store_url)

    async def current() -> dict[str, str]:
        return await provenance(judge, rubric, settings.prompts_dir, settings.judge_mode)

    return AnchorRunner(store, judge, rubric, settings.drift, AnchorMetrics(registry), current), labels


@app.command()
def simulate(count: Annotated[int, typer.Option(min=1, max=100_000, help="Anchors to write.")] = 200,
             seed: Annotated[int, typer.Option(min=0, help="Simulator seed.")] = 0) -> None:
    """Write an anchor set (JSON lines on stdout) labelled with the simulator's ground truth."""
    try:
        settings = load_settings()
        rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    except ConvmonError as exc:
        raise _fail(exc) from exc
    for line in simulated_anchors(rubric, count, seed=seed):
        sys.stdout.write(line.decode() + "\n")


@app.command()
def load(file: Annotated[Path | None, typer.Argument(help="Anchor set: JSON lines of conversation + labels.")] = None,
         from_human_labels: Annotated[bool, typer.Option("--from-human-labels", help=(
             "Build the set from the human labels in the label store (review page, `convmon labels import`) "
             "instead of a file."))] = False,
         max_anchors: Annotated[int, typer.Option(min=MIN_ANCHORS, help=(
             "With --from-human-labels: keep the most recently labelled this many."))] = DEFAULT_MAX,
         version: Annotated[str | None, typer.Option(help=(
             "Version (default: the file's SHA-256 prefix, or human-<hash of the labels>)."))] = None,
         name: Annotated[str | None, typer.Option(help="Set name (default: CONVMON_ANCHORS_SET).")] = None) -> None:
    """Redact and store a new version of the anchor set; its first run becomes the baseline."""
    try:
        if (file is None) == (not from_human_labels):
            raise ConfigError("give an anchor FILE or --from-human-labels, not both or neither")
        settings = load_settings()
        labels, store, rubric = _open(settings)
        set_name, summary = name or settings.anchors_set, ""
        try:
            ref = conversation_ref(settings.pii_reference_key, labels)
            redactor = Redactor.from_settings(settings.judge)
            if file is not None:
                anchors = read_anchors(file, rubric, redactor=redactor, ref=ref)
                set_version = version or file_version(file)
            else:
                built = human_anchors(labels, rubric, redactor=redactor, ref=ref, max_anchors=max_anchors)
                anchors, set_version = built.anchors, version or content_version(built.anchors)
                summary = f" from human labels ({built.skipped_text()})"
                print(dumps({"anchor_set": set_name, "version": set_version, "anchors": len(anchors),
                             "skipped": dict(built.skipped), "items": built.items}))
                latest = store.latest_version(set_name)
                if version is None and latest is not None and latest[0] == set_version:
                    console.print(f"{set_name} version {set_version} is current: no new human labels",
                                  highlight=False)
                    return
            count = store.load(set_name, set_version, anchors)
        finally:
            labels.close()
    except ConvmonError as exc:
        raise _fail(exc) from exc
    console.print(f"loaded {count} anchors as {set_name} version {set_version}{summary}", highlight=False,
                  markup=False, soft_wrap=True)


@app.command()
def run(once: Annotated[bool, typer.Option("--once", help="One check (and run, if due), then exit.")] = False,
        simulated_set: Annotated[int, typer.Option(min=0, max=100_000, help=(
            "Demo: when no set is loaded yet, load this many anchors labelled with the simulator's truth."))] = 0,
        ) -> None:
    """Re-judge the anchor set on schedule and on every provenance change; serve /metrics."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_safety()
    try:
        settings = load_settings()
        registry = CollectorRegistry()
        runner, labels = _runner(settings, registry)
        if simulated_set and runner.store.latest_version(settings.anchors_set) is None:
            _load_simulated(settings, labels, runner, simulated_set)
    except ConvmonError as exc:
        raise _fail(exc) from exc
    try:
        if once:
            report = asyncio.run(runner.tick())
            print(dumps({"run": asdict(report) if report else None}))
            return
        if settings.anchors_metrics_port:
            start_http_server(settings.anchors_metrics_port, addr=settings.metrics_host, registry=registry)
        asyncio.run(_serve(runner))
    except ConvmonError as exc:
        raise _fail(exc) from exc
    finally:
        labels.close()


def _load_simulated(settings: Settings, labels: LabelStore, runner: AnchorRunner, count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "anchors.jsonl"
        path.write_bytes(b"\n".join(simulated_anchors(runner.rubric, count)))
        anchors = read_anchors(path, runner.rubric, redactor=Redactor.from_settings(settings.judge),
                               ref=conversation_ref(settings.pii_reference_key, labels))
        runner.store.load(settings.anchors_set, f"simulated-{count}", anchors)


async def _serve(runner: AnchorRunner) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await runner.serve(stop)
    finally:
        await runner.judge.aclose()


@app.command()
def status() -> None:
    """Per item: drifted or not, both e-values, yes share and human agreement (baseline, latest); runs (JSON)."""
    try:
        settings = load_settings()
        runner, labels = _runner(settings, CollectorRegistry())
        try:
            items = runner.evaluate()
            name, version, epoch = runner.current_set()
            runs = runner.store.runs(name, version, epoch)
        finally:
            labels.close()
    except ConvmonError as exc:
        raise _fail(exc) from exc
    out: dict[str, Any] = {
        "anchor_set": name, "version": version, "baseline_epoch": epoch, "alpha": settings.anchors_alpha,
        "runs": [asdict(r) for r in runs], "items": {item: asdict(d) for item, d in items.items()},
        "drifted": sorted(item for item, d in items.items() if d.drifted),
    }
    print(dumps(out))


@app.command()
def baseline() -> None:
    """Accept the judge as it is now: the next run starts a new baseline and clears every drift alarm."""
    try:
        settings = load_settings()
        labels, store, _ = _open(settings)
        try:
            found = store.latest_version(settings.anchors_set)
            if found is None:
                raise ConvmonError(f"no anchor set named {settings.anchors_set!r} is loaded (CONVMON_ANCHORS_SET)")
            epoch = store.new_epoch(settings.anchors_set, found[0])
        finally:
            labels.close()
    except ConvmonError as exc:
        raise _fail(exc) from exc
    console.print(f"{settings.anchors_set} version {found[0]}: baseline {epoch} starts at the next run",
                  highlight=False)
