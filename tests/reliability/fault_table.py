"""The fault suite's tables (var/faults/*.json, written by ``make faults``) as one Markdown table, for
docs/reliability.md: ``python -m tests.reliability.fault_table``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.reliability.fault_run import ARTIFACTS

ORDER = ("kill_9_twice", "broker_restart", "unkeyed", "metadata_bomb", "five_mb_events", "internal_garbage",
         "scale_out_in")
HEADER = ("| fault | produced | scored once | dead-lettered as expected | lost | double counted | wrong outcome "
          "| dead letters by reason | garbage dead-lettered | Prometheus increase() / truth | scraped at all "
          "| worker exits / agent crashes | run |")


def row(t: dict[str, object]) -> str:
    prom = t["prometheus"]
    assert isinstance(prom, dict)
    reasons = ", ".join(f"{r} {n}" for r, n in sorted(t["dead_letter_reasons"].items()))  # type: ignore[union-attr]
    garbage = f"{t['garbage_dead_lettered']} / {t['garbage_produced']}" if t["garbage_produced"] else "-"
    exits = f"{len(t['worker_crashes'])} / {t['agent_crashes']}"  # type: ignore[arg-type]
    cells = [t["fault"], t["produced"], t["scored_once"], t["dead_lettered"], t["lost"], t["double_counted"],
             t["wrong_outcome"], reasons or "-", garbage, f"{prom['counted']} / {prom['truth']}",
             round(prom["scraped_total"]), exits, f"{t['duration_s']} s"]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(directory: Path = ARTIFACTS) -> str:
    found = {p.stem: json.loads(p.read_text()) for p in directory.glob("*.json")}
    names = [n for n in ORDER if n in found] + sorted(set(found) - set(ORDER))
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    return "\n".join([*lines, *(row(found[n]) for n in names)])


if __name__ == "__main__":
    print(table(Path(sys.argv[1]) if len(sys.argv) > 1 else ARTIFACTS))
