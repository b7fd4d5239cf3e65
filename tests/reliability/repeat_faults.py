"""Consecutive runs of chosen faults, outside CI: ``python -m tests.reliability.repeat_faults RUNS FAULT...``
(faults as test_delivery_faults.py names them, e.g. ``kill_9_twice two_workers_one_killed``, or
``dev_broker_restart``: test_faults.py's memory-only broker killed and restarted, timed until the worker scored
again);
``python -m tests.reliability.repeat_faults table [DIR]`` prints the kept runs as a table.

The old engine lost data in 1 of 3-10 runs; one green suite run says little about that. Each run is a separate
pytest process (a fresh broker); its per-id table is kept as ``var/faults/repeats/<fault>-<n>.json`` and a line per
run is printed: lost, double counted, wrong outcome, Prometheus against the truth, judge calls per judged."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.reliability.fault_run import ARTIFACTS

OUT = ARTIFACTS / "repeats"


def summary(t: dict[str, Any]) -> dict[str, Any]:
    """Per run: ids lost, counted twice (records on the topic twice: at least once) or wrongly; score ids counted
    once; Prometheus and the exported totals against the truth; what the judge was paid."""
    prom, judge, totals = t["prometheus"], t.get("judge") or {}, t.get("exported_totals") or {}
    return {"fault": t["fault"], "lost": t["lost"], "double_counted": t["double_counted"],
            "wrong_outcome": t["wrong_outcome"], "scored_once_by_score_id": t["scored_once_by_score_id"],
            "prometheus": round(prom["scraped_total"]), "truth": prom["truth"],
            "totals_series_differing": totals.get("series_differing"),
            "judge_slice": judge.get("slice"), "judge_scored_once_by_score_id": judge.get("scored_once_by_score_id"),
            "judge_lost": judge.get("lost"), "judge_double": judge.get("double_counted"),
            "judge_calls_per_judged": judge.get("calls_per_judged"), "duration_s": t["duration_s"]}


def table(directory: Path = OUT) -> str:
    """The kept runs as one Markdown table (docs/reliability.md)."""
    head = ("| run | fault | lost | wrong | distilled once by score id | Prometheus / truth | totals series differing "
            "| judge: slice / once by score id / lost | judge calls per judged |")
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    kept = [p for p in directory.glob("*-*.json") if not p.stem.startswith(DEV_BROKER)]
    for path in sorted(kept, key=lambda p: (p.stem.rsplit("-", 1)[0], int(p.stem.rsplit("-", 1)[1]))):
        r = summary(json.loads(path.read_text()))
        lines.append(f"| {path.stem.rsplit('-', 1)[1]} | {r['fault']} | {r['lost']} | {r['wrong_outcome']} | "
                     f"{r['scored_once_by_score_id']} | {r['prometheus']} / {r['truth']} | "
                     f"{r['totals_series_differing']} | {r['judge_slice']} / {r['judge_scored_once_by_score_id']} / "
                     f"{r['judge_lost']} | {r['judge_calls_per_judged']} |")
    return "\n".join(lines)


# the development broker (memory only) killed and restarted: everything on it is gone; test_faults.py's test
DEV_BROKER = "dev_broker_restart"


def run(fault: str, n: int) -> dict[str, Any]:
    started = time.monotonic()
    where = (["-m", "long", "tests/reliability/test_faults.py", "-k", "test_broker_restart"] if fault == DEV_BROKER
             else ["-m", "faults", "tests/reliability/test_delivery_faults.py", "-k", fault])
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *where],
                          capture_output=True, text=True)
    table = ARTIFACTS / f"{fault}.json"
    line: dict[str, Any] = {"run": n, "pytest_rc": done.returncode, "wall_s": round(time.monotonic() - started)}
    if table.exists() and table.stat().st_mtime >= time.time() - line["wall_s"] - 5:
        shutil.copy(table, OUT / f"{fault}-{n}.json")
        kept = json.loads(table.read_text())
        line.update(kept if fault == DEV_BROKER else summary(kept))
    else:
        line.update(fault=fault, error="no table written", tail=done.stdout[-2000:])
    return line


def main(runs: int, faults: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / "runs.jsonl").open("a") as log:
        for n in range(1, runs + 1):
            for fault in faults:
                line = run(fault, n)
                log.write(json.dumps(line) + "\n")
                log.flush()
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "table":
        print(table(Path(sys.argv[2]) if len(sys.argv) > 2 else OUT))
    else:
        main(int(sys.argv[1]), sys.argv[2:])
