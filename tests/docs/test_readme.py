"""The README is what a newcomer reads first: short, and its two set-up commands are the ones CI and
the demo run."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_reads_in_five_minutes_and_starts_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.encode()) <= 12 * 1024, "reference belongs in docs/: keep the README within 12 KB"
    assert "\nmake demo " in text and "\nmake test " in text
