"""Reading a worker's /metrics back into numbers: for the demo's table and for tests."""

from __future__ import annotations

from collections import defaultdict

import httpx
from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str, timeout: float = 2.0) -> list[tuple[str, dict[str, str], float]]:
    text = httpx.get(url, timeout=timeout).text
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def total(samples: list[tuple[str, dict[str, str], float]], name: str, **match: str) -> float:
    """Sum of a metric's samples whose labels match, over every other label (dimensions, workers)."""
    return sum(v for n, labels, v in samples if n == name and all(labels.get(k) == x for k, x in match.items()))


def by_label(samples: list[tuple[str, dict[str, str], float]], name: str, label: str,
             **match: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for n, labels, v in samples:
        if n == name and all(labels.get(k) == x for k, x in match.items()):
            out[labels.get(label, "")] += v
    return dict(out)
