"""Write ``docs/benchmarks.md`` from benchmark JSON (the sections in ``doc_markdown.py`` and ``doc_use.py``;
terminal tables in ``doc_tables.py``).

``regenerate`` is the one command behind the doc: optionally run every benchmark (saving
``use.json``, ``use-turns.json``, ``distill.json``, ``throughput.json``, ...), then write markdown from whatever
results exist. Numbers come only from those files; the paper's rows are labelled as the paper's. A section
whose results file is missing keeps the text the existing doc has for it, and a regenerated section keeps the
``### `` subsections of the existing doc marked :data:`KEEP` (measurements written by hand that no results file
holds). The calibration section points to ``docs/benchmarks-calibration.md``, which ``convmon calibrate
evaluate`` writes. The USS section is rendered when ``use.json`` is saved; without ``use-turns.json`` it says its
turn-supervised rows are missing rather than keeping rows no saved file holds.
"""

from __future__ import annotations

import json
import platform
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.doc_detect import detect_markdown
from bench.doc_markdown import cost_markdown, distill_markdown, sampler_markdown, throughput_markdown
from bench.doc_use import TURNS_COMMAND, use_markdown
from distill.datasets import SHARED_DATA

CALIBRATION_DOC = "benchmarks-calibration.md"
KEEP = "<!-- written by hand: `convmon bench report` keeps this subsection -->"  # the line under its ### heading
COMMANDS = {
    "use": "convmon bench use --full --json --out var/bench/use.json",
    "use-turns": TURNS_COMMAND,
    "distill": "convmon bench distill --json --out var/bench/distill.json",
    "throughput": "convmon bench throughput --json --out var/bench/throughput.json",
    "throughput-conversations": "convmon bench throughput --mode conversations --json "
                                "--out var/bench/throughput-conversations.json",
    "sampler": "convmon bench sampler --json --out var/bench/sampler.json",
    "cost": "convmon bench cost --json --out var/bench/cost.json --plot docs/bench-cost.png",
    "detect": "convmon bench detect --sources uss,simulator --json --out var/bench/detect.json "
              "--plot docs/bench-detect.png",
}


def split_sections(markdown: str) -> dict[str, str]:
    r"""Every ``## `` section of a markdown doc by title, heading included, as written.

    >>> split_sections("# T\n\n## A\n\nx\n\n## B\ny\n")
    {'A': '## A\n\nx', 'B': '## B\ny'}
    """
    sections: dict[str, list[str]] = {}
    title = None
    for line in markdown.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            sections[title] = []
        elif title is not None:
            sections[title].append(line)
    return {t: "\n".join([f"## {t}", *lines]).strip() for t, lines in sections.items()}


def kept_subsections(section: str) -> list[str]:
    """The ``### `` subsections of a section whose first line under the heading is :data:`KEEP`.

    >>> kept_subsections(f"## S\\n\\nx\\n\\n### A\\n{KEEP}\\na\\n\\n### B\\nb")
    ['### A\\n<!-- written by hand: `convmon bench report` keeps this subsection -->\\na']
    """
    subsections = re.split(r"(?m)^(?=### )", section)[1:]
    return [sub.strip() for sub in subsections if sub.splitlines()[1:2] == [KEEP]]


# Pages besides docs/benchmarks.md, by the results that fill them; every other section is on benchmarks.md.
PAGES = {"benchmarks-speed.md": ("Benchmarks: speed", ("throughput", "throughput-conversations")),
         "benchmarks-alerting.md": ("Benchmarks: judge spend and alerting", ("cost", "detect"))}
SECTIONS = (("Accuracy: SPUR Table 1 protocol on USS", "use"),
            ("Speed: distilled path vs raw consume, and the judge path", "throughput"),
            ("Speed: whole-conversation input", "throughput-conversations"),
            ("Distillation fidelity to the teacher", "distill"),
            ("Uncertainty sampling: teacher AUC at equal judge spend", "sampler"),
            ("Cost: judge slice, rate error and spend", "cost"),
            ("Spike detection: the shipped alert on each rate at equal judge spend", "detect"))


def render(results: dict[str, dict[str, Any]], calibration: str | None = None,
           previous: dict[str, str] | None = None) -> str:
    """Every section of the benchmark pages, in one markdown text (:func:`paginate` splits it).

    A benchmark without results keeps its section from ``previous`` (:func:`split_sections` of the
    existing pages) when there is one, else says how to produce it.
    """
    previous = previous or {}
    pages = ", ".join(f"[{title.split(': ', 1)[1]}]({page})" for page, (title, _) in PAGES.items())
    parts = ["# Benchmarks", "",
             "To reproduce every number here, run `make bench` in a source checkout (about 80 minutes on 2 cores), "
             "or one benchmark's command (under each heading) followed by `convmon bench report --no-run`, which "
             "re-renders saved results from `var/bench/`. `convmon bench` runs from a source checkout only: the "
             "benchmarks are not installed with the package. Generated: do not edit by hand, except in subsections "
             "marked as written by hand, which the report keeps.",
             "",
             f"Machine: {platform.machine()}, {platform.system()}, Python {platform.python_version()}; "
             "2 CPU cores shared with other work (CI and other developers' test runs), so absolute rates are noisy. "
             "Every ratio is measured inside one run, back to back, on the same machine.", "",
             f"More pages: {pages}, [calibration]({CALIBRATION_DOC}).", ""]

    def uss(result: dict[str, Any]) -> str:
        return use_markdown(result, results.get("use-turns"))

    render_section: dict[str, Callable[[dict[str, Any]], str]] = {
        "use": uss, "throughput": throughput_markdown, "throughput-conversations": throughput_markdown,
        "distill": distill_markdown, "sampler": sampler_markdown, "cost": cost_markdown, "detect": detect_markdown}
    for title, key in SECTIONS:
        if key not in results and title in previous:
            parts += [previous[title], ""]
            continue
        command = f"`{COMMANDS[key]}`"
        command += f"; turn-supervised rows: `{COMMANDS['use-turns']}`" if key == "use" else ""
        parts += [f"## {title}", "", f"Command: {command}", ""]
        parts.append(render_section[key](results[key]) if key in results else "_Not run yet._")
        for kept in kept_subsections(previous.get(title, "")):
            parts += ["", kept]
        parts.append("")
    parts += ["## Calibration (LLM-Rubric)", "",
              f"Command: `convmon calibrate evaluate`; its tables are in [{CALIBRATION_DOC}]({CALIBRATION_DOC})."
              if calibration else f"_See `docs/{CALIBRATION_DOC}` once written._", ""]
    return "\n".join(parts)


def paginate(markdown: str, main: str = "benchmarks.md") -> dict[str, str]:
    """:func:`render`'s text split into pages: file name -> markdown. Each extra page opens with its title and
    where to read how its numbers are reproduced."""
    sections = split_sections(markdown)
    page_of = {title: page for title, key in SECTIONS for page, (_, keys) in PAGES.items() if key in keys}
    out = {main: [markdown.split("\n## ", 1)[0].rstrip(), ""]}
    for page, (title, _) in PAGES.items():
        out[page] = [f"# {title}", "", f"Generated with [{main}]({main}) by `convmon bench report`, which says how "
                     "to reproduce these numbers and on what machine; do not edit by hand, except in subsections "
                     "marked as written by hand.", ""]
    for title, text in sections.items():
        out[page_of.get(title, main)] += [text, ""]
    return {page: "\n".join(parts) for page, parts in out.items()}


def regenerate(results_dir: Path, doc: Path, *, run: bool = False, data_dir: Path | None = None,
               progress: Callable[[str], None] | None = None) -> Path:
    """Write ``doc`` and the pages of :data:`PAGES` beside it; returns ``doc``."""
    results_dir.mkdir(parents=True, exist_ok=True)
    if run:
        _run_all(results_dir, data_dir, progress)
    loaded = {k: json.loads((results_dir / f"{k}.json").read_text(encoding="utf-8"))
              for k in COMMANDS if (results_dir / f"{k}.json").is_file()}
    calibration_path = doc.parent / CALIBRATION_DOC
    calibration = calibration_path.read_text(encoding="utf-8") if calibration_path.is_file() else None
    previous: dict[str, str] = {}
    for path in (doc, *(doc.parent / page for page in PAGES)):
        if path.is_file():
            previous |= split_sections(path.read_text(encoding="utf-8"))
    doc.parent.mkdir(parents=True, exist_ok=True)
    for page, text in paginate(render(loaded, calibration, previous), doc.name).items():
        (doc.parent / page).write_text(text, encoding="utf-8")
    return doc


def _run_all(results_dir: Path, data_dir: Path | None, progress: Callable[[str], None] | None) -> None:
    from bench.cost import CostConfig, run_cost
    from bench.detect import DetectConfig, run_detect
    from bench.distill_fidelity import FidelityConfig, run_fidelity
    from bench.otlp_throughput import with_otlp_row
    from bench.sampler_gain import SamplerConfig, run_sampler
    from bench.throughput import ThroughputConfig, run_throughput
    from bench.throughput_cpu import run_cpu_rounds
    from bench.use import TURN_MODELS, UseConfig, full_config, run_use

    jobs: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("use", lambda: run_use(full_config(data_dir or SHARED_DATA), progress)),
        ("use-turns", lambda: run_use(UseConfig(data_dir=data_dir or SHARED_DATA, models=TURN_MODELS, curve=()),
                                      progress)),
        ("distill", lambda: run_fidelity(FidelityConfig(), progress)),
        ("throughput", lambda: with_otlp_row(run_throughput(ThroughputConfig(data_dir=data_dir or SHARED_DATA),
                                                            progress), True, progress)
         | run_cpu_rounds(ThroughputConfig(data_dir=data_dir or SHARED_DATA), 3, progress)),
        ("throughput-conversations", lambda: run_throughput(
            ThroughputConfig(data_dir=data_dir or SHARED_DATA, mode="conversations"), progress)),
        ("sampler", lambda: run_sampler(SamplerConfig(data_dir=data_dir or SHARED_DATA), progress)),
        ("cost", lambda: run_cost(CostConfig(data_dir=data_dir or SHARED_DATA), progress,
                                  plot=Path("docs/bench-cost.png"))),
        ("detect", lambda: run_detect(DetectConfig(sources=("uss", "simulator"), data_dir=data_dir or SHARED_DATA),
                                      plot=Path("docs/bench-detect.png"))),
    ]
    for name, job in jobs:
        started = time.perf_counter()
        result = job()
        result["elapsed_s"] = round(time.perf_counter() - started, 1)
        (results_dir / f"{name}.json").write_text(json.dumps(result, indent=2, default=float), encoding="utf-8")
