"""The fault suite's tables (var/faults/*.json, written by ``make faults``) as one Markdown table, for
docs/reliability.md: ``python -m tests.reliability.fault_table``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.reliability.fault_run import ARTIFACTS

ORDER = ("kill_9_twice", "broker_restart", "unkeyed", "metadata_bomb", "five_mb_events", "internal_garbage",
         "scale_out_in", "two_workers_one_killed", "otlp_1_partition", "otlp_3_partitions")
HEADER = ("| fault | produced | distilled: scored once | dead-lettered as expected | lost | double counted "
          "| wrong outcome | dead letters by reason | garbage dead-lettered | judge: slice / judged once by score id "
          "/ lost / double / outside | Prometheus first + increase(), net of retractions / truth "
          "| exported totals: series differing "
          "/ series (scored distilled, llm) | worker exits / agent crashes | scores read back: tail / full "
          "(partitions disagreeing) | run |")


def row(t: dict[str, Any]) -> str:
    prom = t["prometheus"]
    reasons = ", ".join(f"{r} {n}" for r, n in sorted(t["dead_letter_reasons"].items()))
    garbage = f"{t['garbage_dead_lettered']} / {t['garbage_produced']}" if t["garbage_produced"] else "-"
    exits = f"{len(t['worker_crashes'])} / {t['agent_crashes']}"
    back = t.get("readback")  # tables written before the full re-read at the end have none
    read = "-"
    if back:
        s = back["scores"]
        read = (f"{s['tail_records']} / {s['full_records']} ({len(s['partitions_disagreeing'])})"
                + ("" if back.get("complete", s["complete"]) else ", not to the end"))
    j = t.get("judge")  # tables written before the judge was on have none
    judge = (f"{j['slice']} / {j['scored_once_by_score_id']} / {j['lost']} / {j['double_counted']} / "
             f"{j['outside_slice']}" if j else "-")
    e = t.get("exported_totals")
    totals = "-"
    if e:
        scored = e["scored_exported"]
        totals = (f"{e['series_differing']} / {e['series']} ({round(scored.get('distilled', 0))}, "
                  f"{round(scored.get('llm', 0))})")
    cells = [t["fault"], t["produced"], t["scored_once"], t["dead_lettered"], t["lost"], t["double_counted"],
             t["wrong_outcome"], reasons or "-", garbage, judge,
             f"{round(prom.get('net', prom['scraped_total']))} / {prom['truth']}",
             totals, exits, read, f"{t['duration_s']} s"]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(directory: Path = ARTIFACTS) -> str:
    found = {p.stem: json.loads(p.read_text()) for p in directory.glob("*.json")}
    names = [n for n in ORDER if n in found] + sorted(set(found) - set(ORDER))
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    return "\n".join([*lines, *(row(found[n]) for n in names)])


if __name__ == "__main__":
    print(table(Path(sys.argv[1]) if len(sys.argv) > 1 else ARTIFACTS))
