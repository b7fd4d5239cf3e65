"""The fault run of returning users: conversations that come back after they were scored, once or twice, across
kill -9s; each id's revisions read back from the scores topic, the truth computed from the latest revisions, and
what the workers export and Prometheus counts, net of the retraction counters."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from aiokafka import ConsumerRecord
from prometheus_client import CollectorRegistry

from monitor.contracts.metrics import RETRACTED, Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.score_codec import decode_score
from monitor.contracts.scores import ScoreRecord
from monitor.contracts.settings import Settings
from monitor.runtime.scrape import scrape
from monitor.stages.export import Exporter
from monitor.stages.sampler import route_draw
from monitor.tools.simulator.generate import SimConversation
from tests.reliability.fault_run import (
    ARTIFACTS,
    FLIPPABLE,
    P_DIGITS_ERROR,
    SETTLE_S,
    STALL_S,
    FaultRun,
    Key,
    exported,
    mismatches,
    totals_names,
    whole,
)
from tests.support.readback import read_to_end
from tests.support.topic_io import Record

Revisions = dict[tuple[str, str], dict[int, int]]  # (scorer, id) -> revision -> copies on the scores topic
NET_SCORED = ('sum(partition:convmon_partition_conversations_scored_total:max{{scorer="{0}"}}) - '
              'sum(partition:convmon_partition_conversations_scored_retracted_total:max{{scorer="{0}"}})')


def come_back(conv: SimConversation, times: int, truth: list[str]) -> list[Record]:
    """The user's ``times``-th return: a user turn, the assistant's answer and an end with the turn count."""
    turns = [e for e in conv.events if e["type"] == "turn"]
    n, ts = len(turns) + 2 * (times - 1), float(turns[-1]["timestamp"]) + 60.0 * times
    cid, key = conv.conversation_id, conv.conversation_id.encode()
    events = [{"type": "turn", "conversation_id": cid, "turn_index": n, "role": "user",
               "text": "this is still wrong" if truth else "thanks, that worked", "timestamp": ts},
              {"type": "turn", "conversation_id": cid, "turn_index": n + 1, "role": "assistant",
               "text": "Sorry about that, here is another way.", "timestamp": ts + 1},
              {"type": "end", "conversation_id": cid, "timestamp": ts + 2, "turn_count": n + 2,
               "simulated_truth": truth}]
    return [(key, orjson.dumps(e)) for e in events]


def come_back_whole(conv: SimConversation, times: int, truth: list[str]) -> Record:
    """The user's ``times``-th return of a conversation sent whole: the whole conversation again, with each
    return's user turn and answer (``come_back``'s) after its own turns."""
    key, value = whole(conv)
    event = orjson.loads(value)
    for time_ in range(1, times + 1):
        returned = [orjson.loads(v) for _, v in come_back(conv, time_, truth)]
        event["turns"] += [{"index": t["turn_index"], "role": t["role"], "text": t["text"],
                            "timestamp": t["timestamp"]} for t in returned if t["type"] == "turn"]
    event["simulated_truth"] = truth
    return key, orjson.dumps(event)


def revisions_of(records: Iterable[ConsumerRecord], settings: Settings, into: Revisions | None = None) -> Revisions:
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    out: Revisions = into if into is not None else defaultdict(lambda: defaultdict(int))
    for record in records:
        score = decode_score(record.value, rubric)
        out[(score.scorer, score.conversation_id)][score.revision] += 1
    return out


def latest_truth(records: Iterable[ConsumerRecord], settings: Settings) -> tuple[dict[Key, float], Counter[str]]:
    """The partition totals of the latest revision of every (scorer, conversation) on the scores topic (a judge
    record's residuals against the distilled record of the same revision), and the agreement pairs per item that
    the topic's rounding may flip (``fault_run.truth_of``)."""
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    by_revision: dict[tuple[str, str, int], ScoreRecord] = {}
    for record in records:
        score = decode_score(record.value, rubric)
        by_revision.setdefault((score.scorer, score.conversation_id, score.revision), score)
    latest: dict[tuple[str, str], ScoreRecord] = {}
    for (scorer, cid, _), score in sorted(by_revision.items()):
        latest[(scorer, cid)] = score
    metrics = Metrics(CollectorRegistry(), dimensions=tuple(settings.metric_dimensions))
    exporter = Exporter(metrics, dimensions=list(settings.metric_dimensions), cap=settings.dimension_cap,
                        rubric=rubric, allowed_values=settings.dimension_values,
                        series_budget=settings.metric_series_budget)
    families = metrics.partition_families
    out: dict[Key, float] = defaultdict(float)
    flippable: Counter[str] = Counter()
    for (scorer, cid), score in latest.items():
        shadow = by_revision.get(("distilled", cid, score.revision)) if scorer == "llm" else None
        shadows = {cid: {i.item_id: i.probability for i in shadow.items if i.probability is not None}} if shadow \
            else None
        flippable.update(FLIPPABLE + item for item, p in (shadows or {}).get(cid, {}).items()
                         if abs(p - 0.5) <= P_DIGITS_ERROR)
        for (attribute, values), amount in exporter.observe_batch([score], shadows).items():
            family = families.get(attribute)
            if family is not None:
                out[(family.name + "_total", tuple(sorted(zip(family.labels, values, strict=True))))] += amount
    return dict(out), flippable


def net_of(totals: dict[Key, float]) -> dict[Key, float]:
    """Each total less its retraction twin: what the recording rules count."""
    out: dict[Key, float] = defaultdict(float)
    for (name, labels), value in totals.items():
        if name.endswith(RETRACTED + "_total"):
            out[(name.removesuffix(RETRACTED + "_total") + "_total", labels)] -= value
        else:
            out[(name, labels)] += value
    return dict(out)


class ReopenRun:
    """Around a FaultRun: who comes back how often, what is expected of each id, and the table at the end."""

    def __init__(self, run: FaultRun, convs: list[SimConversation], back: dict[str, int]) -> None:
        self.run, self.convs, self.back = run, convs, back
        s = run.settings
        self.expected = {c.conversation_id: 1 + back.get(c.conversation_id, 0) for c in convs}
        self.slice = {cid for cid in self.expected if route_draw(cid, s.sample_salt) < s.sample_rate}
        self.seen: Revisions = defaultdict(lambda: defaultdict(int))

    def poll(self) -> None:
        revisions_of(self.run.scores.poll(), self.run.settings, self.seen)

    def reached(self, scorer: str, ids: Iterable[str], revision: Callable[[str], int]) -> bool:
        return all(revision(cid) in self.seen.get((scorer, cid), {}) for cid in ids)

    def done(self) -> bool:
        return (self.reached("distilled", self.expected, self.expected.__getitem__)
                and self.reached("llm", self.slice, self.expected.__getitem__))

    def wait(self, condition: Callable[[], bool], *, limit_s: float = 600.0) -> bool:
        """Until ``condition()`` (polling the scores topic), or no new score record for ``STALL_S``."""
        last, changed, started = -1, time.monotonic(), time.monotonic()
        while time.monotonic() - changed < STALL_S and time.monotonic() - started < limit_s:
            self.poll()
            if condition():
                return True
            if len(self.run.scores.records) != last:
                last, changed = len(self.run.scores.records), time.monotonic()
            time.sleep(1.0)
        return False

    def table(self) -> dict[str, Any]:
        run, s = self.run, self.run.settings
        complete = self.wait(self.done)
        time.sleep(max(0.0, run.produced_at + SETTLE_S - time.time()))
        records = read_to_end(run.broker, s.topic("scores"), timeout_s=run.readback_timeout_s).records
        seen = revisions_of(records, s)
        wrong: dict[str, list[str]] = {"distilled": [], "llm": []}
        for scorer, ids in (("distilled", self.expected), ("llm", self.slice)):
            for cid in ids:
                if set(seen.get((scorer, cid), {})) != set(range(1, self.expected[cid] + 1)):
                    wrong[scorer].append(f"{cid}: {dict(seen.get((scorer, cid), {}))} want 1..{self.expected[cid]}")
        outside = sorted(cid for (scorer, cid) in seen if scorer == "llm" and cid not in self.slice)
        live = [w for w in run.supervisor.workers.values() if w.alive()]
        got = net_of(exported([scrape(w.url, timeout=30.0) for w in live], totals_names(s)))
        want, flippable = latest_truth(records, s)
        scored: Any = defaultdict(int, {"distilled": len(self.expected), "llm": len(self.slice), **flippable})
        differ = mismatches(got, want, scored)
        scored_net = {sc: sum(v for (n, labels), v in got.items() if n == "convmon_partition_conversations_scored_total"
                              and dict(labels).get("scorer") == sc) for sc in ("distilled", "llm")}
        if live:
            run.prometheus.wait_scraped_after(time.time(), [w.target for w in live])
            for scorer in ("distilled", "llm"):
                run.prometheus.wait_stable(NET_SCORED.format(scorer))
        prometheus = {}
        for scorer in ("distilled", "llm"):
            counted = {}
            for name in ("convmon_partition_conversations_scored_total",
                         "convmon_partition_conversations_scored_retracted_total"):
                series = run.prometheus.increases(f'partition:{name}:max{{scorer="{scorer}"}}', run.started)
                counted[name] = round(sum(x.increase + x.first for x in series), 3)
            prometheus[scorer] = {"counted": counted["convmon_partition_conversations_scored_total"],
                                  "retracted": counted["convmon_partition_conversations_scored_retracted_total"],
                                  "net": round(counted["convmon_partition_conversations_scored_total"]
                                               - counted["convmon_partition_conversations_scored_retracted_total"], 3)}
        table = {
            "fault": run.name, "complete": complete, "conversations": len(self.expected),
            "came_back_once": sum(1 for n in self.back.values() if n == 1),
            "came_back_twice": sum(1 for n in self.back.values() if n == 2),
            "revisions_expected": sum(self.expected.values()), "judge_slice": len(self.slice),
            "revisions_wrong": {k: len(v) for k, v in wrong.items()}, "examples": {k: v[:5] for k, v in wrong.items()},
            "llm_outside_slice": len(outside),
            "score_records": len(records),
            "copies_above_one": sum(n - 1 for revs in seen.values() for n in revs.values() if n > 1),
            "exported": {"scored_net": scored_net, "series": len(set(got) | set(want)),
                         "series_differing": len(differ), "differ": differ[:12]},
            "prometheus": prometheus,
            "worker_crashes": [vars(e) for e in run.supervisor.crashes()],
            "worker_kills": sum(1 for e in run.supervisor.exits if e.injected),
            "duration_s": round(time.time() - run.started, 1), **run.notes,
        }
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"{run.name}.json").write_text(json.dumps(table, indent=2, default=str))
        print(f"\n[fault {run.name}] {json.dumps({k: v for k, v in table.items() if k != 'examples'})}")
        return table
