"""Per-item rates over a recent window, from a worker's cumulative /metrics counters.

The worker exports counters since it started; a rate over the last ``window_s`` seconds is the
difference of two scrapes, as Prometheus's ``increase()`` would compute it. The baseline is
everything the run saw before that window, so a change shows as window vs baseline.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from monitor.runtime.scrape import Sample, by_label, local_http

# A rate over fewer scored conversations than this is shown as "-": too noisy to read.
MIN_CONVERSATIONS = 10


@dataclass(frozen=True)
class Counts:
    """The cumulative counters the demo reads, one scrape, per rubric item."""

    t: float
    judge_yes: dict[str, float] = field(default_factory=dict)  # llm "yes" verdicts
    judge_n: dict[str, float] = field(default_factory=dict)  # llm verdicts of any kind
    dist_prob: dict[str, float] = field(default_factory=dict)  # distilled probability sums
    dist_n: dict[str, float] = field(default_factory=dict)  # distilled verdicts (items the model has)
    scored_llm: float = 0.0
    scored_distilled: float = 0.0
    unscored: dict[str, float] = field(default_factory=dict)  # by reason
    lag: float = 0.0  # messages the worker is behind its input and internal topics (convmon_consumer_lag_messages)


# The families the demo reads; a worker exports thousands of other series it need not parse.
FAMILIES = ("convmon_rubric_verdicts", "convmon_rubric_probability_sum", "convmon_conversations_scored",
            "convmon_conversations_unscored", "convmon_dead_letters")
GAUGES = ("convmon_consumer_lag_messages",)


def parse_families(text: str, families: tuple[str, ...] = FAMILIES, gauges: tuple[str, ...] = GAUGES) -> list[Sample]:
    """The ``_total`` samples of ``families`` and the ``gauges`` from a /metrics text, without parsing the rest."""
    wanted = (*(f"{f}_total" for f in families), *(f"{g}{{" for g in gauges), *(f"{g} " for g in gauges))
    lines = [line for line in text.splitlines() if line.startswith(wanted)]
    out: list[Sample] = []
    for family in text_string_to_metric_families("\n".join(lines) + "\n"):
        out.extend((s.name, s.labels, s.value) for s in family.samples)
    return out


def scrape_counts(url: str, t: float, timeout: float = 5.0) -> tuple[Counts, float]:
    """One scrape of a worker: the demo's counters and the dead-letter total.

    Only these families are asked for (prometheus_client's ``name[]`` filter, which the worker's endpoint
    honours): rendering the whole exposition (over 10,000 series in a demo run, about 40 µs of CPU each) once a
    second for the screen cost the busy worker as much as Prometheus's own scrape, and scrapes failed."""
    names = [*(f"{f}_total" for f in FAMILIES), *GAUGES]
    samples = parse_families(local_http().get(url, params=[("name[]", n) for n in names], timeout=timeout).text)
    return counts(samples, t), sum(v for n, _, v in samples if n == "convmon_dead_letters_total")


def counts(samples: list[Sample], t: float) -> Counts:
    verdicts = "convmon_rubric_verdicts_total"
    scored = by_label(samples, "convmon_conversations_scored_total", "scorer")
    return Counts(
        t=t,
        judge_yes=by_label(samples, verdicts, "rubric", scorer="llm", verdict="yes"),
        judge_n=by_label(samples, verdicts, "rubric", scorer="llm"),
        dist_prob=by_label(samples, "convmon_rubric_probability_sum_total", "rubric", scorer="distilled"),
        dist_n=by_label(samples, verdicts, "rubric", scorer="distilled"),
        scored_llm=scored.get("llm", 0.0),
        scored_distilled=scored.get("distilled", 0.0),
        unscored=by_label(samples, "convmon_conversations_unscored_total", "reason"),
        lag=sum(v for n, _, v in samples if n == "convmon_consumer_lag_messages"),
    )


@dataclass(frozen=True)
class Rate:
    value: float  # share of scored conversations, 0..1
    n: float  # scored conversations it is computed from


def _ratio(num: float, den: float) -> Rate | None:
    return Rate(num / den, den) if den >= MIN_CONVERSATIONS else None


def _delta(new: dict[str, float], old: dict[str, float], key: str) -> float:
    """A counter's increase; a decrease means the worker restarted, so the new value is all increase."""
    a, b = new.get(key, 0.0), old.get(key, 0.0)
    return a - b if a >= b else a


@dataclass
class RateHistory:
    """Scrapes in time order, and the rates between any two of them."""

    snapshots: list[Counts] = field(default_factory=list)

    def add(self, snapshot: Counts) -> None:
        if self.snapshots and snapshot.t < self.snapshots[-1].t:
            raise ValueError("snapshots must be added in time order")
        self.snapshots.append(snapshot)

    @property
    def latest(self) -> Counts | None:
        return self.snapshots[-1] if self.snapshots else None

    def at(self, t: float) -> Counts:
        """The last snapshot taken at or before ``t`` (the first one when ``t`` precedes them all)."""
        i = bisect_right([s.t for s in self.snapshots], t)
        return self.snapshots[max(0, i - 1)]

    def between(self, old: Counts, new: Counts, item: str, scorer: str) -> Rate | None:
        if scorer == "llm":
            return _ratio(_delta(new.judge_yes, old.judge_yes, item), _delta(new.judge_n, old.judge_n, item))
        return _ratio(_delta(new.dist_prob, old.dist_prob, item), _delta(new.dist_n, old.dist_n, item))

    def window(self, item: str, scorer: str, window_s: float, t: float | None = None) -> Rate | None:
        """The rate over ``(t - window_s, t]``, ``t`` defaulting to the latest scrape."""
        if not self.snapshots:
            return None
        new = self.at(self.snapshots[-1].t if t is None else t)
        return self.between(self.at(new.t - window_s), new, item, scorer)

    def baseline(self, item: str, scorer: str, window_s: float, until: float | None = None) -> Rate | None:
        """The rate over the whole run before the recent window: what "normal" looked like so far. ``until``
        (the start of a known change, the demo's spike) ends it earlier, so the change never becomes the
        baseline it is compared with."""
        if not self.snapshots:
            return None
        zero = Counts(t=self.snapshots[0].t)
        end = self.snapshots[-1].t - window_s
        return self.between(zero, self.at(end if until is None else min(end, until)), item, scorer)

    def series(self, item: str, scorer: str, window_s: float, step_s: float) -> list[tuple[float, float | None]]:
        """The windowed rate every ``step_s`` seconds after the first scrape: the curve of the plot."""
        if not self.snapshots:
            return []
        start, end = self.snapshots[0].t, self.snapshots[-1].t
        out: list[tuple[float, float | None]] = []
        t = start + step_s
        while t <= end + 1e-9:
            rate = self.window(item, scorer, window_s, t)
            out.append((t, rate.value if rate else None))
            t += step_s
        return out


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None], top: float) -> str:
    """One character per value, scaled to ``top``; a gap where there was too little data."""
    if top <= 0:
        top = 1.0
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        else:
            out.append(SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1) + 0.5))])
    return "".join(out)


def unscored_total(snapshot: Counts) -> float:
    return sum(snapshot.unscored.values())
