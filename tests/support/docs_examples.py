"""Examples the user docs show, read from the docs themselves, so the tests run what a reader copies."""

from __future__ import annotations

import re

from monitor.contracts.settings import REPO_ROOT

INPUT_DOC = REPO_ROOT / "docs" / "input.md"


def openai_chat_example() -> list[bytes]:
    """The `jsonl` block of docs/input.md's "OpenAI chat logs", one message per line."""
    section = INPUT_DOC.read_text().split("## OpenAI chat logs", 1)[1]
    block = re.search(r"```jsonl\n(.*?)```", section, re.S)
    assert block is not None
    return [line.encode() for line in block.group(1).splitlines()]
