"""Consecutive runs of chosen faults, outside CI: ``python -m tests.reliability.repeat_faults RUNS FAULT...``
(faults as test_delivery_faults.py names them, e.g. ``kill_9_twice two_workers_one_killed``).

The old engine lost data in 1 of 3-10 runs; one green suite run says little about that. Each run is a separate
pytest process (a fresh broker); its per-id table is kept as ``var/faults/repeats/<fault>-<n>.json`` and a line per
run is printed: lost, double counted, wrong outcome, Prometheus against the truth, judge calls per judged."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from typing import Any

from tests.reliability.fault_run import ARTIFACTS

OUT = ARTIFACTS / "repeats"


def summary(t: dict[str, Any]) -> dict[str, Any]:
    prom, judge = t["prometheus"], t.get("judge") or {}
    return {"fault": t["fault"], "lost": t["lost"], "double_counted": t["double_counted"],
            "wrong_outcome": t["wrong_outcome"], "prometheus": round(prom["scraped_total"]), "truth": prom["truth"],
            "judge_lost": judge.get("lost"), "judge_double": judge.get("double_counted"),
            "judge_calls_per_judged": judge.get("calls_per_judged"), "duration_s": t["duration_s"]}


def run(fault: str, n: int) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "faults",
                           "tests/reliability/test_delivery_faults.py", "-k", fault], capture_output=True, text=True)
    table = ARTIFACTS / f"{fault}.json"
    line: dict[str, Any] = {"run": n, "pytest_rc": done.returncode, "wall_s": round(time.monotonic() - started)}
    if table.exists() and table.stat().st_mtime >= time.time() - line["wall_s"] - 5:
        shutil.copy(table, OUT / f"{fault}-{n}.json")
        line.update(summary(json.loads(table.read_text())))
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
    main(int(sys.argv[1]), sys.argv[2:])
