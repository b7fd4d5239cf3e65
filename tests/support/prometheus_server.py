"""A real Prometheus server (Debian package ``prometheus``) scraping worker processes, and the one question
the fault suite asks it: how much did a counter increase over the run, as ``increase()`` computes it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitor.tools.local_prometheus import LocalPrometheus, prometheus_binary
from tests.support.workers import wait_until


@dataclass(frozen=True)
class SeriesIncrease:
    labels: dict[str, str]
    increase: float  # Prometheus's increase() over the series' whole life
    first: float  # the first scraped value: what increase() cannot see
    samples: int


class PrometheusServer(LocalPrometheus):
    """Scrapes ``targets`` every ``scrape_s`` seconds with convmon's rule files, evaluated as often."""

    def __init__(self, workdir: Path, targets: list[str], *, scrape_s: float = 1.0) -> None:
        exe = prometheus_binary()
        if exe is None:
            pytest.fail("prometheus not found: install the Debian package `prometheus` (apt-get install prometheus)")
        super().__init__(exe, workdir, targets, scrape_s=scrape_s, evaluate_every_scrape=True)
        self.start(timeout=60)

    def wait_scraped_after(self, t: float, targets: list[str], timeout: float = 60.0) -> None:
        """Until every target in ``targets`` was scraped (successfully) after wall-clock time ``t``."""

        def done() -> bool:
            last = {r["metric"]["instance"]: float(r["value"][1])
                    for r in self.query('timestamp(up{job="convmon"} == 1)')}
            return all(last.get(target, 0.0) > t for target in targets)

        wait_until(done, timeout=timeout, interval=self.scrape_s / 2, message=f"scrapes of {targets} after {t}")

    def wait_stable(self, expr: str, scrapes: int = 3, timeout: float = 120.0) -> None:
        """Until the value of ``expr`` has not changed over ``scrapes`` scrape intervals: the workers have
        exported everything they are going to."""
        seen: list[str] = []

        def stable() -> bool:
            seen.append(json.dumps(sorted((r["metric"], r["value"][1]) for r in self.query(expr)), sort_keys=True))
            return len(seen) > scrapes and len(set(seen[-scrapes - 1:])) == 1

        wait_until(stable, timeout=timeout, interval=self.scrape_s, message=f"{expr} stable over {scrapes} scrapes")

    def increases(self, selector: str, since: float) -> list[SeriesIncrease]:
        """``increase()`` of every series matching ``selector`` over its whole life since ``since``.

        Each series is asked at its own last sample (the ``@`` modifier) over the range back to its
        first sample, so Prometheus extrapolates nothing: the result is what it counted, resets
        included. Like any ``increase()``, it cannot see the value a series was born with.
        """
        now = time.time()
        window = int(now - since) + 2
        out = []
        for series in self.query(f"{selector}[{window}s]", at=now):
            values = [(float(t), float(v)) for t, v in series["values"]]
            labels = series["metric"]
            if len(values) < 2:
                out.append(SeriesIncrease(labels, 0.0, values[0][1] if values else 0.0, len(values)))
                continue
            (t0, v0), (t1, _) = values[0], values[-1]
            matcher = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
            selector_of_one = f"{labels['__name__']}{{{matcher}}}"
            span_ms = round((t1 - t0) * 1000)
            # Prometheus 2 selects [t - span, t], Prometheus 3 (t - span, t]: widen by 1 ms only if needed (a
            # wider range makes increase() extrapolate that 1 ms)
            inside = self.query(f"count_over_time({selector_of_one}[{span_ms}ms] @ {t1:.3f})", at=now)
            if not inside or int(float(inside[0]["value"][1])) < len(values):
                span_ms += 1
            result = self.query(f"increase({selector_of_one}[{span_ms}ms] @ {t1:.3f})", at=now)
            out.append(SeriesIncrease(labels, float(result[0]["value"][1]) if result else 0.0, v0, len(values)))
        return out
