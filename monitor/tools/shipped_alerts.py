"""The shipped Prometheus rules, evaluated by a real Prometheus on a time-compressed copy.

The demo (and tests) cannot wait 30 minutes for a rate window. Every duration of the rule files
(range windows, subquery steps, offsets, group intervals, ``for:``) is divided by ``scale``; the
expressions, thresholds and volume guards are the shipped ones, read from ``deploy/prometheus/rules``
at run time, so the demo follows whatever rule file is shipped. A real Prometheus runs them in
:mod:`monitor.tools.local_prometheus`; this module rewrites the rules and reads the alerts' state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from monitor.contracts.errors import ConfigError
from monitor.contracts.settings import REPO_ROOT

RULES_DIR = REPO_ROOT / "deploy" / "prometheus" / "rules"
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DUR = r"(?:\d+(?:ms|s|m|h|d|w|y))+"
_RANGE = re.compile(rf"\[({_DUR})(?::({_DUR})?)?\]")
_OFFSET = re.compile(rf"\boffset\s+(-?)({_DUR})")


def duration_s(text: str) -> float:
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(n) * UNITS[u] for n, u in parts)


def scale_duration(text: str, scale: float) -> str:
    return f"{max(1, round(duration_s(text) * 1000 / scale))}ms"


def scale_expr(expr: str, scale: float) -> str:
    """``expr`` with every range, subquery step and offset divided by ``scale``."""
    def _range(m: re.Match[str]) -> str:
        step = m.group(2)
        colon = ":" + (scale_duration(step, scale) if step else "") if ":" in m.group(0) else ""
        return f"[{scale_duration(m.group(1), scale)}{colon}]"

    expr = _RANGE.sub(_range, expr)
    return _OFFSET.sub(lambda m: f"offset {m.group(1)}{scale_duration(m.group(2), scale)}", expr)


def scaled_rule_files(out_dir: Path, scale: float, rules_dir: Path = RULES_DIR, *,
                      group_interval: str | None = None) -> list[Path]:
    """Every shipped rule file, time-compressed by ``scale``, written to ``out_dir``.

    ``group_interval`` evaluates every group that often instead (tests that read recording rules at each scrape).
    """
    out = []
    for path in sorted(rules_dir.glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        for group in doc.get("groups", []):
            group["interval"] = group_interval or scale_duration(group.get("interval", "1m"), scale)
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = scale_duration(str(rule["for"]), scale)
                if "keep_firing_for" in rule:
                    rule["keep_firing_for"] = scale_duration(str(rule["keep_firing_for"]), scale)
                rule["expr"] = scale_expr(str(rule["expr"]), scale)
        target = out_dir / path.name
        target.write_text(yaml.safe_dump(doc, sort_keys=False))
        out.append(target)
    return out


def rule_file_of(alert: str, rules_dir: Path = RULES_DIR) -> Path:
    """The shipped rule file that defines ``alert`` (the demo names the alert, not the file)."""
    for path in sorted(rules_dir.glob("*.yml")):
        doc = yaml.safe_load(path.read_text()) or {}
        if any(r.get("alert") == alert for g in doc.get("groups", []) for r in g.get("rules", [])):
            return path
    raise ConfigError(f"no rule file in {rules_dir} defines the alert {alert}")


@dataclass(frozen=True)
class AlertState:
    """One alert rule's state as Prometheus reports it: the worst over its series."""

    state: str  # inactive | pending | firing
    firing: tuple[str, ...] = ()  # the series, as "rubric (scorer)" or their labels
    pending: tuple[str, ...] = ()
    values: dict[str, float] = field(default_factory=dict)

    def for_scorer(self, scorer: str) -> AlertState:
        """Only the series of one scorer (``llm``, ``distilled``, ``corrected``): the judge's view, the classifiers'
        and the corrected rate's."""
        suffix = f" ({scorer})"
        firing = tuple(x for x in self.firing if x.endswith(suffix))
        pending = tuple(x for x in self.pending if x.endswith(suffix))
        state = "firing" if firing else "pending" if pending else "inactive"
        return AlertState(state, firing, pending, {k: v for k, v in self.values.items() if k.endswith(suffix)})


def _series_name(labels: dict[str, str]) -> str:
    if "rubric" in labels:
        return f"{labels['rubric']} ({labels.get('scorer', '?')})"
    skip = {"alertname", "severity"}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in skip) or "-"


def alert_state(alerts: list[dict[str, Any]], *names: str) -> AlertState:
    """Read the state of the alerts ``names`` from the body of Prometheus's ``/api/v1/alerts`` (``data.alerts``):
    their series together, told apart by their ``scorer`` label."""
    firing: list[str] = []
    pending: list[str] = []
    values: dict[str, float] = {}
    for alert in alerts:
        labels = alert.get("labels", {})
        if labels.get("alertname") not in names:
            continue
        series = _series_name(labels)
        (firing if alert.get("state") == "firing" else pending).append(series)
        try:
            values[series] = float(alert.get("value", "nan"))
        except ValueError:
            pass
    state = "firing" if firing else "pending" if pending else "inactive"
    return AlertState(state, tuple(sorted(firing)), tuple(sorted(pending)), values)


def firing_episodes(timeline: list[tuple[float, AlertState]], scorer: str) -> list[tuple[float, tuple[str, ...]]]:
    """When the alert went to firing on ``scorer``'s series (each start of a firing run) and on which series."""
    out: list[tuple[float, tuple[str, ...]]] = []
    was_firing = False
    for t, alert in timeline:
        mine = alert.for_scorer(scorer)
        if mine.state == "firing" and not was_firing:
            out.append((t, mine.firing))
        was_firing = mine.state == "firing"
    return out
