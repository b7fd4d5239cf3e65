"""The README is what a newcomer reads first: short, and its two set-up commands are the ones CI and
the demo run."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_reads_in_five_minutes_and_starts_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.encode()) <= 12 * 1024, "reference belongs in docs/: keep the README within 12 KB"
    assert "\nmake demo " in text and "\nmake test " in text


def test_the_example_producers_metadata_is_exported_as_itself_by_the_example_worker() -> None:
    """send.py's metadata values, under the worker settings the README exports, are labels, not ``other``."""
    import json
    import re
    import shlex

    from monitor.contracts.settings import Settings
    from monitor.stages.export import DimensionLabels

    text = README.read_text()
    exports = dict(kv.split("=", 1) for line in re.findall(r"^export (.+?)(?:\s+#.*)?$", text, re.M)
                   for kv in shlex.split(line))
    settings = Settings(dimension_values=json.loads(exports["CONVMON_DIMENSION_VALUES"]))
    labels = DimensionLabels(settings.metric_dimensions, cap=settings.dimension_cap,
                             allowed=settings.dimension_values, pattern=settings.dimension_value_pattern)
    [metadata] = set(re.findall(r'"metadata": (\{[^}]*\})', text))
    values, overflowed = labels.values(json.loads(metadata))
    assert overflowed == [] and values[0] == json.loads(metadata)["app"]
